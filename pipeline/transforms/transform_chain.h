// TransformChain: ops applied one after the other to each sample, validated once for an input
// spec before the run (each op's OutputSpec in order), then applied per sample with no
// allocation through two caller-owned ping-pong intermediates. The ops come parsed, as a
// TransformSpec (transform_spec.h), whose ops the chain shares.
//
//   ASSIGN_OR_RETURN(TransformChain chain, TransformChain::Create(spec, input));
//   std::vector<char> scratch(chain.scratch_bytes());          // one per thread
//   chain.Apply(src, dst, SampleKey{seed, epoch, index}, scratch.data());
//
// A chain may start from encoded images (input EncodedSampleSpec(max_h, max_w), first op
// DecodeImage): sizes then vary per sample until an op fixes them (Resize to (h, w),
// RandomResizedCrop, CenterCrop), and Create refuses a chain whose output size still varies,
// naming the ops that fix it. Such a chain runs one record at a time through ApplyRecord, which
// returns kDataLoss for a record it cannot transform (a corrupt or oversized image). Scratch is
// sized from the bound, so no sample allocates.
//
// Op k draws its random parameters from SampleRandom(key, k), so an op's draws depend on
// neither the other ops nor the order samples are processed in.
//
// Per-op timing: pass `op_ns` (size() accumulators) to Apply; the samples with
// TimesSample(index) (every kTimingStride-th index) add each op's steady-clock ns to it, the
// others cost one branch. Accumulators belong to the caller (one set per thread).
//
// Decode timing: a chain on encoded input (decodes()) times its first op, the decoder, on every
// record ApplyRecord is given a DecodeTiming for (decoding is milliseconds, the clock tens of
// nanoseconds): the pipeline's decode stage (Stage::kDecode) is built from these.
//
// Resize then CenterCrop: where a chain starts DecodeImage, Resize, CenterCrop (the evaluation
// transform, Resize(256), CenterCrop(224)) and the crop is no larger than the resized image,
// a JPEG decodes only the source rows and columns the crop's part of the resize reads, and
// only that part is resized (transforms_internal::ResizeInterleavedU8Region): the same bits
// as the three ops one by one (fused_chain_test.cc). With op_ns, the decode's time goes to
// DecodeImage and the resize's to Resize (CenterCrop's line reads 0). A PNG, or a crop larger
// than the resized image (padded), goes the usual way.
//
// Fused ops: where a chain starts DecodeImage, RandomResizedCrop (optionally followed by
// RandomHorizontalFlip), ApplyRecord runs those ops as one internal fast path: the crop's
// resize reads the decoder's interleaved pixels (no split of the whole image into planes) and
// writes the flip's mirrored rows directly. Each op still draws from SampleRandom(key, its
// position), and the output is bitwise the unfused chain's (tests/pipeline/transforms/
// fused_chain_test.cc). With op_ns, the decode's time goes to DecodeImage and the crop's and
// the flip's together to RandomResizedCrop (the flip's line reads 0). Create(..., false) turns
// fusion off.
//
// Thread safety: immutable after Create; Apply may run on many threads with their own scratch.
#ifndef SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_
#define SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/center_crop.h"
#include "pipeline/transforms/decode_image.h"
#include "pipeline/transforms/random_horizontal_flip.h"
#include "pipeline/transforms/random_resized_crop.h"
#include "pipeline/transforms/resize.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_spec.h"

namespace sluice {

// One record's decode, as ApplyRecord measured it (`delay_us` is an input: an injected delay,
// busy-waited inside the decode's span, the decode stage's --inject-delay).
struct DecodeTiming {
  int64_t delay_us = 0;
  int64_t start_ns = 0;  // 0: nothing was decoded (the record was refused before or by decode)
  int64_t end_ns = 0;
  uint64_t bytes = 0;         // the bytes decoded (the region a crop-window decode covered)
  uint64_t stored_bytes = 0;  // the whole image's bytes at the output's channels
};

// Whether a fused DecodeImage + RandomResizedCrop decodes only the crop's window of a JPEG
// (DecodeImage::DecodeJpegWindow): yes unless the environment sets SLUICE_WINDOW_DECODE=0, the
// benchmarks' switch to compare it with the whole decode. The output is bitwise the same.
bool WindowDecodeEnabled();

class TransformChain {
 public:
  static constexpr uint64_t kTimingStride = 16;
  static bool TimesSample(uint64_t index) { return index % kTimingStride == 0; }

  // kInvalidArgument naming the op (its position, identity and input spec) that cannot take
  // what the ops before it output, or saying which ops would fix a size that still varies at
  // the end. An empty chain copies samples unchanged (and is refused on encoded input).
  // The chain shares the spec's ops (transform_spec.h).
  static absl::StatusOr<TransformChain> Create(const TransformSpec& spec, const SampleSpec& input,
                                               bool fuse_ops = true);
  static absl::StatusOr<TransformChain> Create(std::vector<std::unique_ptr<Transform>> ops,
                                               const SampleSpec& input, bool fuse_ops = true);

  const SampleSpec& input_spec() const { return specs_.front(); }
  // Always kFixed: the size of every output sample.
  const SampleSpec& output_spec() const { return specs_.back(); }
  // The input spec of op i (i < size()) or the output (i == size()); a bound where sizes vary.
  const SampleSpec& spec(size_t i) const { return specs_[i]; }
  size_t size() const { return spec_.size(); }
  const Transform& op(size_t i) const { return spec_.op(i); }
  // True when samples' sizes vary before some op (encoded input): run it with ApplyRecord.
  bool varies() const { return variable_ops_ > 0; }
  // True when the input is encoded images: op 0 is the decoder.
  bool decodes() const { return !spec_.empty() && specs_.front().extent == SampleExtent::kEncoded; }
  // The ops' identities joined by ", " (ParseTransforms reads it back); "" when empty.
  const std::string& Identity() const { return spec_.identity(); }
  // How many leading ops ApplyRecord runs as one fused path: 0 (none), 2 (DecodeImage and
  // RandomResizedCrop) or 3 (and RandomHorizontalFlip).
  size_t fused_ops() const { return fused_ops_; }

  // Bytes of scratch Apply and ApplyRecord need per thread (two intermediates, each 64-byte
  // aligned within it, then the ops' own working memory); 0 for fixed chains of up to one op.
  size_t scratch_bytes() const { return 2 * scratch_half_ + op_scratch_; }

  // Transforms one sample of a fixed-size chain (!varies()): src holds input_spec().bytes(),
  // dst receives output_spec().bytes(); scratch holds scratch_bytes() and is 64-byte aligned,
  // as are src and dst to their element size. src and dst must not overlap.
  void Apply(const void* src, void* dst, const SampleKey& key, void* scratch,
             int64_t* op_ns = nullptr) const;

  // Transforms one record of src_bytes bytes (an encoded image when the input is kEncoded, else
  // exactly input_spec().bytes()) into output_spec().bytes() at dst, with the same scratch,
  // alignment and timing as Apply. kDataLoss, starting with the op's identity, when the record
  // cannot be transformed (corrupt, truncated, empty, not an image, larger than the bound); the
  // caller adds the file and record.
  // `decode` (decodes() chains only; may be null) receives the decode's span and size.
  absl::Status ApplyRecord(const void* src, size_t src_bytes, void* dst, const SampleKey& key,
                           void* scratch, int64_t* op_ns = nullptr,
                           DecodeTiming* decode = nullptr) const;

  // Op 0 (the decoder) alone on one record: the decoded image into `dst` (room for
  // spec(1).bytes(), the bound), its actual spec returned; kDataLoss as ApplyRecord. With
  // ApplyDecoded, a run can replay cached decoded images (what-if decode).
  absl::StatusOr<SampleSpec> DecodeRecord(const void* src, size_t src_bytes, void* dst,
                                          void* scratch) const;
  // The decode alone as ApplyRecord decodes `src` for `key`: only the crop's window of a JPEG
  // where the chain decodes windows (the fused RandomResizedCrop path, DecodeImage then
  // CenterCrop), else the whole image into `dst` (room for spec(1).bytes()). Returns the bytes
  // the decode row counts for it (DecodeTiming::bytes); kDataLoss as ApplyRecord. The decode
  // ceiling measures this, so that it and the run decode alike.
  absl::StatusOr<uint64_t> DecodeAsRun(const void* src, size_t src_bytes, void* dst,
                                       const SampleKey& key, void* scratch) const;
  // Whether DecodeAsRun decodes JPEG windows (else it is DecodeRecord).
  bool decodes_windows() const {
    return window_decode_ || center_ != nullptr || resize_crop_ != nullptr;
  }

  // The ops after the decoder on an image DecodeRecord produced (`decoded` its spec, `pixels`
  // its decoded.bytes() bytes), into dst, as ApplyRecord would have; `op_ns[0]` is untouched.
  absl::Status ApplyDecoded(const SampleSpec& decoded, const void* pixels, void* dst,
                            const SampleKey& key, void* scratch, int64_t* op_ns = nullptr) const;

 private:
  TransformChain() = default;

  // Resize then CenterCrop of a height x width image (resize_crop_): the source window the
  // crop's part of the resize reads, and that part; nullopt where the crop pads (the usual way).
  struct ResizeCropPlan {
    transforms_internal::PixelWindow source;  // in the image's pixels
    uint32_t height = 0, width = 0;           // the image's size
    uint32_t resized_h = 0, resized_w = 0;    // Resize's output
    transforms_internal::PixelWindow part;    // the crop's part of it
  };
  std::optional<ResizeCropPlan> PlanResizeCrop(uint32_t height, uint32_t width) const;

  // A windowed chain's decode (decodes_windows()) of the record in `io`: op 0 decodes the
  // window the chain's crop keeps for `key` (RandomResizedCrop's draws, CenterCrop's part, or
  // what Resize then CenterCrop reads: `plan` receives that plan). RunFrom and DecodeAsRun
  // both decode through it. nullopt for a record neither JPEG nor PNG; kDataLoss prefixed with
  // op 0's identity.
  absl::StatusOr<std::optional<DecodeImage::Window>> DecodeWindow(
      const SampleBuffers& io, const SampleKey& key, std::optional<ResizeCropPlan>* plan) const;

  // Ops [first, size()) on `in` (`actual` its spec, in_bytes its size), the rest as ApplyRecord.
  absl::Status RunFrom(size_t first, SampleSpec actual, const void* in, size_t in_bytes, void* dst,
                       const SampleKey& key, void* scratch, int64_t* op_ns,
                       DecodeTiming* decode) const;

  TransformSpec spec_;             // the ops
  std::vector<SampleSpec> specs_;  // size() + 1: the input, then each op's output
  size_t scratch_half_ = 0;
  size_t op_scratch_ = 0;
  size_t variable_ops_ = 0;  // the leading ops whose input size varies per sample
  // The fused path's ops (fused_ops_ > 0), pointing into spec_'s.
  size_t fused_ops_ = 0;
  // The fused path decodes only the crop's window of a JPEG (WindowDecodeEnabled).
  bool window_decode_ = false;
  // A chain starting DecodeImage, CenterCrop (when WindowDecodeEnabled): its ops, pointing into
  // spec_'s; a JPEG decodes only the part the crop keeps.
  const DecodeImage* center_decode_ = nullptr;
  const CenterCrop* center_ = nullptr;
  // A chain starting DecodeImage, Resize, CenterCrop (when WindowDecodeEnabled): its ops.
  const DecodeImage* resize_decode_ = nullptr;
  const Resize* resize_ = nullptr;
  const CenterCrop* resize_crop_ = nullptr;
  const DecodeImage* decode_ = nullptr;
  // The chain's first op where it is a DecodeImage (any chain): the stored size of a record
  // decoded whole under a draft (DecodeImage::StoredPixels).
  const DecodeImage* first_decode_ = nullptr;
  const RandomResizedCrop* crop_ = nullptr;
  const RandomHorizontalFlip* flip_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_
