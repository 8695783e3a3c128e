#include "pipeline/transforms/to_dtype.h"

#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/elements.h"

namespace sluice {
namespace {
constexpr auto kDtypeNames = MakeEnumNames<ElementType>({{ElementType::kU8, "u8"},
                                                         {ElementType::kF16, "f16"},
                                                         {ElementType::kBF16, "bf16"},
                                                         {ElementType::kF32, "f32"},
                                                         {ElementType::kU8, "uint8"},
                                                         {ElementType::kF16, "float16"},
                                                         {ElementType::kF16, "half"},
                                                         {ElementType::kBF16, "bfloat16"},
                                                         {ElementType::kF32, "float32"},
                                                         {ElementType::kF32, "float"}});

template <typename Out, typename Convert>
void CastEach(const void* src, size_t in_size, void* dst, size_t n, Convert convert) {
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const Out v = convert(in + i * in_size);
    std::memcpy(out + i * sizeof(Out), &v, sizeof(Out));
  }
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> ToDtype::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(std::string name, args.Name("dtype", std::nullopt));
  if (absl::StartsWith(name, "torch.")) name = name.substr(6);
  const std::optional<ElementType> dtype = kDtypeNames.Parse(name);
  if (!dtype) {
    return args.Wrong("dtype", kDtypeNames.List());
  }
  ASSIGN_OR_RETURN(const bool scale, args.Bool("scale", false));
  if (scale) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("scale"),
                     ": expected False (a cast does not rescale; Normalize takes u8 "
                     "samples to x / 255 and normalizes them)"));
  }
  return std::make_unique<ToDtype>(*dtype);
}

std::string ToDtype::Identity() const {
  return absl::StrCat(kName, "(dtype=", ElementTypeName(dtype_), ")");
}

absl::StatusOr<SampleSpec> ToDtype::OutputSpec(const SampleSpec& in) const {
  SampleSpec out = in;
  out.dtype = dtype_;
  return out;
}

void ToDtype::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  namespace ti = transforms_internal;
  const size_t n = in.values();
  const ElementType from = in.dtype;
  const size_t in_size = ElementSize(from);
  if (from == dtype_) {
    std::memcpy(dst, src, in.bytes());
    return;
  }
  switch (dtype_) {
    case ElementType::kU8:
      return CastEach<uint8_t>(src, in_size, dst, n, [from](const char* p) {
        return ti::FloatToU8(ti::LoadAsFloat(from, p));
      });
    case ElementType::kF16:
      return CastEach<uint16_t>(src, in_size, dst, n, [from](const char* p) {
        return FloatToHalf(ti::LoadAsFloat(from, p));
      });
    case ElementType::kBF16:
      return CastEach<uint16_t>(src, in_size, dst, n, [from](const char* p) {
        return ti::FloatToBFloat16(ti::LoadAsFloat(from, p));
      });
    case ElementType::kF32:
      return CastEach<float>(src, in_size, dst, n,
                             [from](const char* p) { return ti::LoadAsFloat(from, p); });
  }
}

}  // namespace sluice
