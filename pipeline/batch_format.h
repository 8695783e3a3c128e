// The samples a batch holds, decided before the run from the stored records and BatchFormat:
// with no transforms, the stored sample converted as SampleConverter does; with transforms
// (BatchFormat::transforms, docs/transforms.md), the stored sample as CHW in its stored dtype
// goes through the chain, and the chain's output is converted to the batch's format.
//
//   ASSIGN_OR_RETURN(ResolvedBatchFormat f, ResolveBatchFormat(dataset.spec(), format, names));
//   f.sample                      // the batch's sample spec: sizes every buffer
//   ASSIGN_OR_RETURN(ChainPreprocessor pre, ChainPreprocessor::Create(dataset.spec(), f));
//   std::vector<char> scratch(pre.scratch_bytes() + 64);      // one per thread, 64-aligned
//   pre.Process(record_sample, batch_slot, SampleKey{seed, epoch, position}, aligned, op_ns);
//
// The batch-format rules (docs/transforms.md, "Using a chain"): a chain that outputs u8 goes
// to any h2d format with the normalization applied as without a chain (u8 batches: by the
// consumer); one that outputs f32 goes to f32, f16 or bf16 batches and refuses a normalization
// (the chain normalizes: it would run twice); one that outputs f16 needs f16 batches, and one
// that outputs bf16 bf16 batches, asked for by name (sluice.Loader's dtype=torch.bfloat16:
// sluice-train's engine takes no bf16 batches). BatchFormat::layout sets the batch's layout
// (the chain itself always works on CHW). With h2d_auto the chain's float output picks the format.
// Each refusal is one kInvalidArgument line naming both settings as the caller spells them.
//
// Encoded images (RecordSpec::encoded(): JPEG/PNG records of a version 2 split): the chain's
// input is EncodedSampleSpec(max_height, max_width, max_pixels) of the split's largest image
// when its manifest records it (Manifest::image_bound: the scratch is sized from max_pixels, the
// largest area, not from the box max_width x max_height), else
// EncodedSampleSpec(kDefaultMaxImageSide, kDefaultMaxImageSide) (EncodedChainInput), and its first
// op must be DecodeImage; no transforms, or a chain that starts otherwise, is refused naming what
// to add. Each record goes through TransformChain::ApplyRecord, so Process returns kDataLoss for a
// record it cannot decode (the caller adds the file and record).
//
// Thread safety: ChainPreprocessor is immutable after Create; Process runs on many threads,
// each with its own scratch.
#ifndef SLUICE_PIPELINE_BATCH_FORMAT_H_
#define SLUICE_PIPELINE_BATCH_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/convert.h"
#include "pipeline/pipeline.h"
#include "pipeline/resource_limits.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/transform_chain.h"

namespace sluice {

// The largest height and width an encoded image may declare when the manifest records no image
// sizes (splits written before sample.max_width/max_height existed): a 4k image fits.
// DecodeImage refuses a larger one from its header as a corrupt record. Scratch per preprocess
// thread is sized from the bound.
inline constexpr uint32_t kDefaultMaxImageSide = 4096;

// The chain input of an encoded split: EncodedSampleSpec of `bound` (the manifest's largest
// width, height and area), or of kDefaultMaxImageSide on each side without one.
SampleSpec EncodedChainInput(const std::optional<ImageSizeBound>& bound);

struct ResolvedBatchFormat {
  H2DFormat h2d_format = H2DFormat::kF32;  // after h2d_auto
  SampleSpec sample;  // one batch sample: layout BatchFormat::layout, dtype h2d_format
  // The chain, built for the stored sample as CHW in its dtype; null without transforms.
  std::shared_ptr<const TransformChain> chain;
};

// kInvalidArgument, one line prefixed with the transforms setting's name ("--transforms: " or
// "transforms: "), when an op cannot take what it is given or the batch format cannot take the
// chain's output; CheckNormalization's error for a normalization of the wrong length.
// `image_bound`: the split's largest image (Manifest::image_bound) for encoded records; without
// it the default bound applies.
absl::StatusOr<ResolvedBatchFormat> ResolveBatchFormat(
    const RecordSpec& stored, const BatchFormat& format, SettingNames names,
    const std::optional<ImageSizeBound>& image_bound = std::nullopt);

// One stored record's sample to one batch sample through the chain (see the file comment).
class ChainPreprocessor {
 public:
  static absl::StatusOr<ChainPreprocessor> Create(const RecordSpec& stored,
                                                  const ResolvedBatchFormat& format,
                                                  const Normalization& normalization);

  // Bytes of scratch Process needs per thread (64-byte aligned by the caller).
  size_t scratch_bytes() const { return chain_scratch_offset_ + chain_->scratch_bytes(); }
  const TransformChain& chain() const { return *chain_; }

  // `stored` holds one record's sample as stored (HWC; an encoded image's stored_bytes bytes);
  // `out` receives the batch sample. `op_ns`: chain().size() accumulators, or null
  // (TransformChain::Apply). kDataLoss, naming the op and the reason, for an encoded record
  // that cannot be decoded; always OK for fixed-size records.
  // `decode` (may be null): the record's decode span (TransformChain::ApplyRecord).
  absl::Status Process(const char* stored, size_t stored_bytes, char* out, const SampleKey& key,
                       char* scratch, int64_t* op_ns, DecodeTiming* decode = nullptr) const;
  // The same from an image the chain's decoder already decoded (TransformChain::ApplyDecoded).
  absl::Status ProcessDecoded(const SampleSpec& decoded, const char* pixels, char* out,
                              const SampleKey& key, char* scratch, int64_t* op_ns) const;

 private:
  ChainPreprocessor() = default;
  // The chain's output (in scratch, when there are converters or the batch is HWC) to the
  // batch sample.
  void ConvertOut(const char* chain_out, char* out, char* scratch) const;

  std::shared_ptr<const TransformChain> chain_;
  std::optional<SampleConverter>
      to_chw_;  // stored HWC -> CHW in the stored dtype; unset if encoded
  // The chain's output to the batch's format: one converter per channel plane (u8 output with
  // a per-channel normalization), one for the whole sample, or none (a copy).
  std::vector<SampleConverter> out_converters_;
  // channels_last batches of a u8 chain output: its planes to the batch's dtype and HWC in one
  // pass (SampleConverter::ConvertPlanar); then out_converters_ is empty.
  std::optional<SampleConverter> planar_;
  size_t out_plane_bytes_in_ = 0;   // bytes of one converted input run
  size_t out_plane_bytes_out_ = 0;  // bytes of one converted output run
  // scratch: [CHW input | chain output | converted CHW output (HWC batches) | chain scratch]
  size_t chain_out_offset_ = 0;
  size_t converted_offset_ = 0;
  size_t chain_scratch_offset_ = 0;
  bool to_hwc_ = false;  // channels_last batch of several channels: ChwToHwc into the batch
  ElementType out_dtype_ = ElementType::kF32;  // the batch's
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_BATCH_FORMAT_H_
