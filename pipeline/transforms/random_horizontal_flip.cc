#include "pipeline/transforms/random_horizontal_flip.h"

#include <cstdint>
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

// Bytes: eight at a time, one byte swap reversing each word (a third of the time of the byte
// loop above on 32-wide rows, which the compiler does not vectorize for plain x86-64).
template <>
void MirrorRows<1>(const void* src, void* dst, size_t rows, size_t width) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t r = 0; r < rows; ++r, in += width, out += width) {
    size_t x = 0;
    for (; x + 8 <= width; x += 8) {
      uint64_t word;
      std::memcpy(&word, in + width - 8 - x, 8);
      word = __builtin_bswap64(word);
      std::memcpy(out + x, &word, 8);
    }
    for (; x < width; ++x) out[x] = in[width - 1 - x];
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

std::string RandomHorizontalFlip::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Flips(rng) ? "{\"flip\": true}" : "{\"flip\": false}";
}

void RandomHorizontalFlip::Apply(const SampleSpec& in, const void* src, void* dst,
                                 SampleRandom& rng) const {
  if (!Flips(rng)) {
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
