#include "pipeline/transforms/decode_check.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/decode_image.h"
#include "storage/image_structure.h"

namespace sluice {

absl::Status DecodeCheck(absl::string_view bytes) {
  absl::StatusOr<ImageStructure> header = CheckImageStructure(bytes);
  if (!header.ok()) return header.status();
  const uint64_t pixels = uint64_t{header->width} * header->height;
  if (pixels > kMaxDecodeCheckPixels) {
    return absl::InvalidArgumentError(absl::StrCat("declares ", header->width, "x", header->height,
                                                   " pixels, more than the 2^28 the "
                                                   "decode check decodes"));
  }
  // The header's own size is the bound: DecodeImage then decodes exactly this image.
  const SampleSpec in = EncodedSampleSpec(header->height, header->width);
  const DecodeImage decode(/*channels=*/3);
  std::vector<uint8_t> planes(3 * pixels);
  std::vector<uint8_t> scratch(decode.ScratchBytes(in));
  SampleBuffers io;
  io.src = bytes.data();
  io.src_bytes = bytes.size();
  io.dst = planes.data();
  io.dst_capacity = planes.size();
  io.op_scratch = scratch.data();
  SampleRandom rng(SampleKey{0, 0, 0}, 0);  // DecodeImage draws nothing
  absl::StatusOr<SampleSpec> out = decode.ApplyVariable(in, io, rng);
  if (!out.ok()) return absl::InvalidArgumentError(out.status().message());
  return absl::OkStatus();
}

}  // namespace sluice
