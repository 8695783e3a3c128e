#include "pipeline/transforms/random_horizontal_flip.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
namespace {
template <size_t kBytes>
struct Element {
  char bytes[kBytes];
};

// Reverses `rows` rows of `width` elements each, src to dst.
template <size_t kBytes>
void MirrorRows(const void* src, void* dst, size_t rows, size_t width) {
  const auto* in = static_cast<const Element<kBytes>*>(src);
  auto* out = static_cast<Element<kBytes>*>(dst);
  for (size_t r = 0; r < rows; ++r, in += width, out += width) {
    for (size_t x = 0; x < width; ++x) out[x] = in[width - 1 - x];
  }
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> RandomHorizontalFlip::FromArgs(
    const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  absl::StatusOr<std::unique_ptr<RandomHorizontalFlip>> op = Create(p);
  if (!op.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(args.Where("p"), ": ", op.status().message()));
  }
  return std::unique_ptr<Transform>(std::move(*op));
}

absl::StatusOr<std::unique_ptr<RandomHorizontalFlip>> RandomHorizontalFlip::Create(double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<RandomHorizontalFlip>(new RandomHorizontalFlip(p));
}

std::string RandomHorizontalFlip::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomHorizontalFlip::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  return in;
}

void RandomHorizontalFlip::Apply(const SampleSpec& in, const void* src, void* dst,
                                 SampleRandom& rng) const {
  if (!(rng.UniformDouble() < p_)) {
    std::memcpy(dst, src, in.bytes());
    return;
  }
  const size_t rows = size_t{in.channels} * in.height;
  switch (ElementSize(in.dtype)) {
    case 1:
      return MirrorRows<1>(src, dst, rows, in.width);
    case 2:
      return MirrorRows<2>(src, dst, rows, in.width);
    default:
      return MirrorRows<4>(src, dst, rows, in.width);
  }
}

}  // namespace sluice
