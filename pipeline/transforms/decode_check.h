// DecodeCheck: decodes one JPEG or PNG file's bytes with training's decoder (DecodeImage,
// mode=RGB) and throws the pixels away: `sluice-shard create --verify-images=decode`, which
// finds what ingestion's structure check (storage/image_structure.h) cannot: damaged
// compressed data, CMYK JPEGs, 16-bit PNGs.
//
// Memory: the image's own decoded size (7 bytes per pixel: the planes and the codec's
// interleaved rows), allocated per call; an image declaring more than kMaxDecodeCheckPixels is
// refused from its header instead of being decoded.
// Errors: kInvalidArgument with the reason (the caller adds the file's name): the structure
// check's, or DecodeImage's.
// Thread safety: stateless; callable from many threads (TurboJPEG handles are per thread).
#ifndef SLUICE_PIPELINE_TRANSFORMS_DECODE_CHECK_H_
#define SLUICE_PIPELINE_TRANSFORMS_DECODE_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// 2^28 pixels (a 16384 x 16384 image): about 1.9 GB to decode-check.
inline constexpr uint64_t kMaxDecodeCheckPixels = uint64_t{1} << 28;

absl::Status DecodeCheck(absl::string_view bytes);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_DECODE_CHECK_H_
