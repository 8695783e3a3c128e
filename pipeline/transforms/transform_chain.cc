#include "pipeline/transforms/transform_chain.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/stage_stats.h"
#include "pipeline/transforms/internal/bilinear.h"

namespace sluice {
namespace {

size_t Aligned64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The most bytes one sample of a chain (its input, an op's output) may take: 256 TiB, beyond
// any memory, so a bound past it (an image declaring 2^31 - 1 on each side) is refused before
// the scratch's sizes could wrap around size_t and leave a buffer too small for an image.
constexpr double kMaxChainSampleBytes = 0x1p48;

// The bytes of one sample of `s` at most, in double precision (no wrap-around).
double SampleBytesBound(const SampleSpec& s) {
  return static_cast<double>(s.channels) * static_cast<double>(s.plane_values()) *
         static_cast<double>(ElementSize(s.dtype));
}

// The ops that turn sizes that vary per sample into one fixed size, as an error names them.
constexpr char kSizeFixingOps[] = "Resize((h, w)), RandomResizedCrop(size) or CenterCrop(size)";

absl::Status CheckFixedOutput(const TransformSpec& spec, const SampleSpec& input,
                              const SampleSpec& output) {
  if (output.fixed()) return absl::OkStatus();
  if (spec.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the samples are ", SampleSpecString(input),
                     ": expected a chain that starts with DecodeImage(mode=RGB) and ends with ",
                     kSizeFixingOps));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the chain's output size varies per sample (", SampleSpecString(output),
                   " after ", spec.op(spec.size() - 1).Identity(), "); expected ", kSizeFixingOps,
                   " after the last op, so that every sample of a batch has one size"));
}
}  // namespace

absl::StatusOr<TransformChain> TransformChain::Create(std::vector<std::unique_ptr<Transform>> ops,
                                                      const SampleSpec& input, bool fuse_ops) {
  return Create(TransformSpec(std::move(ops)), input, fuse_ops);
}

absl::StatusOr<TransformChain> TransformChain::Create(const TransformSpec& spec,
                                                      const SampleSpec& input, bool fuse_ops) {
  TransformChain chain;
  chain.specs_.push_back(input);
  for (size_t i = 0; i < spec.size(); ++i) {
    const Transform& transform = spec.op(i);
    const SampleSpec& in = chain.specs_.back();
    absl::StatusOr<SampleSpec> out = transform.OutputSpec(in);
    if (out.ok() && std::max(SampleBytesBound(in), SampleBytesBound(*out)) > kMaxChainSampleBytes) {
      out = absl::InvalidArgumentError(
          absl::StrCat("a sample of up to ", SampleSpecString(*out),
                       " would take more than 2^48 bytes, "
                       "beyond any memory; leave such large images out (sluice-shard create "
                       "--max-image-pixels)"));
    }
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("transform ", i + 1, " of ", spec.size(), ", ", transform.Identity(),
                       ", on ", SampleSpecString(in), ": ", out.status().message()));
    }
    if (!in.fixed()) chain.variable_ops_ = i + 1;
    chain.op_scratch_ = std::max(chain.op_scratch_, Aligned64(transform.ScratchBytes(in)));
    // An area bound means nothing once the size is fixed (ops copy their input spec): clear
    // it, so the declared output equals the spec each sample's ops return.
    if (out->fixed()) out->max_pixels = 0;
    chain.specs_.push_back(*out);
    // Intermediates are the outputs of every op but the last (bounds where sizes vary).
    if (i + 1 < spec.size()) {
      chain.scratch_half_ = std::max(chain.scratch_half_, Aligned64(out->bytes()));
    }
  }
  absl::Status fixed = CheckFixedOutput(spec, input, chain.specs_.back());
  if (!fixed.ok()) return fixed;
  if (spec.size() >= 1) chain.first_decode_ = dynamic_cast<const DecodeImage*>(&spec.op(0));
  if (fuse_ops && spec.size() >= 2) {
    chain.decode_ = dynamic_cast<const DecodeImage*>(&spec.op(0));
    chain.crop_ = dynamic_cast<const RandomResizedCrop*>(&spec.op(1));
    if (chain.decode_ != nullptr && chain.crop_ != nullptr) {
      chain.fused_ops_ = 2;
      chain.window_decode_ = WindowDecodeEnabled();
      chain.flip_ =
          spec.size() >= 3 ? dynamic_cast<const RandomHorizontalFlip*>(&spec.op(2)) : nullptr;
      if (chain.flip_ != nullptr) chain.fused_ops_ = 3;
    } else {
      chain.decode_ = nullptr;
      chain.crop_ = nullptr;
    }
  }
  // DecodeImage, CenterCrop: the decoder decodes only the part the crop keeps.
  if (spec.size() >= 2 && chain.fused_ops_ == 0 && WindowDecodeEnabled()) {
    chain.center_decode_ = dynamic_cast<const DecodeImage*>(&spec.op(0));
    chain.center_ = dynamic_cast<const CenterCrop*>(&spec.op(1));
    if (chain.center_decode_ == nullptr || chain.center_ == nullptr) {
      chain.center_decode_ = nullptr;
      chain.center_ = nullptr;
    }
  }
  // DecodeImage, Resize, CenterCrop: the decoder decodes only what the crop's part reads.
  if (spec.size() >= 3 && chain.fused_ops_ == 0 && WindowDecodeEnabled()) {
    chain.resize_decode_ = dynamic_cast<const DecodeImage*>(&spec.op(0));
    chain.resize_ = dynamic_cast<const Resize*>(&spec.op(1));
    chain.resize_crop_ = dynamic_cast<const CenterCrop*>(&spec.op(2));
    // PIL's resampling (antialias=True) reads other taps than the part's plan holds: the
    // whole image is decoded and resized, then cropped.
    if (chain.resize_decode_ == nullptr || chain.resize_ == nullptr ||
        chain.resize_crop_ == nullptr || chain.resize_->antialias()) {
      chain.resize_decode_ = nullptr;
      chain.resize_ = nullptr;
      chain.resize_crop_ = nullptr;
    }
  }
  chain.spec_ = spec;
  return chain;
}

std::optional<TransformChain::ResizeCropPlan> TransformChain::PlanResizeCrop(uint32_t height,
                                                                             uint32_t width) const {
  const SampleSpec image{ElementType::kU8, specs_[1].channels, height, width, SampleLayout::kCHW};
  const absl::StatusOr<SampleSpec> resized = resize_->OutputSpec(image);
  // A resize larger than the chain's intermediate goes the usual way, which refuses it: the
  // window would deliver what the ops one by one refuse (SLUICE_WINDOW_DECODE=0, or another op
  // between them, and the sample failed).
  if (!resized.ok() || resized->bytes() > scratch_half_) return std::nullopt;
  ResizeCropPlan plan;
  plan.height = height;
  plan.width = width;
  plan.resized_h = resized->height;
  plan.resized_w = resized->width;
  const std::optional<std::pair<uint32_t, uint32_t>> crop = resize_crop_->SizeItMakes();
  if (!crop || crop->first > plan.resized_h || crop->second > plan.resized_w) return std::nullopt;
  plan.part = resize_crop_->SourceWindow(plan.resized_h, plan.resized_w);
  // The source rows and columns the part's taps read (bilinear.h: the same taps as the resize).
  const float scale_y = static_cast<float>(height) / static_cast<float>(plan.resized_h);
  const float scale_x = static_cast<float>(width) / static_cast<float>(plan.resized_w);
  const int64_t r0 = transforms_internal::BilinearTapOf(plan.part.y, scale_y, height).i0;
  const int64_t r1 =
      transforms_internal::BilinearTapOf(plan.part.y + plan.part.height - 1, scale_y, height).i1;
  const int64_t c0 = transforms_internal::BilinearTapOf(plan.part.x, scale_x, width).i0;
  const int64_t c1 =
      transforms_internal::BilinearTapOf(plan.part.x + plan.part.width - 1, scale_x, width).i1;
  if (r0 < 0 || c0 < 0 || r1 < r0 || c1 < c0 || r1 >= height || c1 >= width) return std::nullopt;
  plan.source = transforms_internal::PixelWindow{
      static_cast<uint32_t>(c0), static_cast<uint32_t>(r0), static_cast<uint32_t>(c1 - c0 + 1),
      static_cast<uint32_t>(r1 - r0 + 1)};
  return plan;
}

void TransformChain::Apply(const void* src, void* dst, const SampleKey& key, void* scratch,
                           int64_t* op_ns) const {
  if (spec_.empty()) {
    std::memcpy(dst, src, specs_.front().bytes());
    return;
  }
  const bool timed = op_ns != nullptr && TimesSample(key.index);
  char* halves[2] = {static_cast<char*>(scratch), static_cast<char*>(scratch) + scratch_half_};
  const void* in = src;
  for (size_t i = 0; i < spec_.size(); ++i) {
    void* out = i + 1 == spec_.size() ? dst : halves[i % 2];
    SampleRandom rng(key, i);
    const int64_t start = timed ? NowNs() : 0;
    spec_.op(i).ApplyWithScratch(specs_[i], in, out, rng, halves[1] + scratch_half_);
    if (timed) op_ns[i] += NowNs() - start;
    in = out;
  }
}

absl::Status TransformChain::ApplyRecord(const void* src, size_t src_bytes, void* dst,
                                         const SampleKey& key, void* scratch, int64_t* op_ns,
                                         DecodeTiming* decode) const {
  if (!varies()) {
    if (src_bytes != input_spec().bytes()) {
      return absl::DataLossError(absl::StrCat("a record of ", src_bytes, " bytes; expected ",
                                              input_spec().bytes(), " (",
                                              SampleSpecString(input_spec()), ")"));
    }
    Apply(src, dst, key, scratch, op_ns);
    return absl::OkStatus();
  }
  return RunFrom(0, specs_.front(), src, src_bytes, dst, key, scratch, op_ns,
                 decodes() ? decode : nullptr);
}

absl::StatusOr<SampleSpec> TransformChain::DecodeRecord(const void* src, size_t src_bytes,
                                                        void* dst, void* scratch) const {
  if (!decodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chain decodes nothing: its input is ", SampleSpecString(input_spec())));
  }
  char* base = static_cast<char*>(scratch);
  SampleRandom rng(SampleKey{}, 0);
  const SampleBuffers io{src, src_bytes, dst, specs_[1].bytes(), base + 2 * scratch_half_};
  absl::StatusOr<SampleSpec> out = spec_.op(0).ApplyVariable(specs_.front(), io, rng);
  if (!out.ok()) {
    return absl::DataLossError(absl::StrCat(spec_.op(0).Identity(), ": ", out.status().message()));
  }
  return out;
}

absl::StatusOr<std::optional<DecodeImage::Window>> TransformChain::DecodeWindow(
    const SampleBuffers& io, const SampleKey& key, std::optional<ResizeCropPlan>* plan) const {
  const DecodeImage* decoder = resize_crop_ != nullptr ? resize_decode_
                               : window_decode_        ? decode_
                                                       : center_decode_;
  SampleRandom crop_rng(key, 1);  // RandomResizedCrop's draws, op 1's
  absl::StatusOr<std::optional<DecodeImage::Window>> window =
      decoder->DecodeJpegWindow(specs_[0], io, [&](uint32_t height, uint32_t width) {
        if (resize_crop_ != nullptr) {
          *plan = PlanResizeCrop(height, width);
          return *plan ? (*plan)->source : transforms_internal::PixelWindow{0, 0, width, height};
        }
        if (!window_decode_) return center_->SourceWindow(height, width);
        const CropWindow c = crop_->Window(height, width, crop_rng);
        return transforms_internal::PixelWindow{c.left, c.top, c.width, c.height};
      });
  if (!window.ok()) {
    return absl::DataLossError(
        absl::StrCat(spec_.op(0).Identity(), ": ", window.status().message()));
  }
  return window;
}

absl::StatusOr<uint64_t> TransformChain::DecodeAsRun(const void* src, size_t src_bytes, void* dst,
                                                     const SampleKey& key, void* scratch) const {
  if (decodes_windows()) {
    char* base = static_cast<char*>(scratch);
    const SampleBuffers io{src, src_bytes, nullptr, 0, base + 2 * scratch_half_};
    std::optional<ResizeCropPlan> plan;
    ASSIGN_OR_RETURN(const std::optional<DecodeImage::Window> window, DecodeWindow(io, key, &plan));
    if (window.has_value()) return window->decoded_pixels * specs_[1].channels;
  }
  ASSIGN_OR_RETURN(const SampleSpec decoded, DecodeRecord(src, src_bytes, dst, scratch));
  return decoded.bytes();
}

bool WindowDecodeEnabled() {
  // SLUICE_WINDOW_DECODE=0 decodes every JPEG whole: the benchmarks' side-by-side switch
  // (docs/transforms.md, "Decoding only the window"). Read once.
  static const bool enabled = [] {
    const char* v = std::getenv("SLUICE_WINDOW_DECODE");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

absl::Status TransformChain::ApplyDecoded(const SampleSpec& decoded, const void* pixels, void* dst,
                                          const SampleKey& key, void* scratch,
                                          int64_t* op_ns) const {
  if (!decodes() || spec_.size() < 2) {
    return absl::InvalidArgumentError("ApplyDecoded: the chain has no ops after a decoder");
  }
  return RunFrom(1, decoded, pixels, decoded.bytes(), dst, key, scratch, op_ns, nullptr);
}

absl::Status TransformChain::RunFrom(size_t first, SampleSpec actual, const void* in,
                                     size_t in_bytes, void* dst, const SampleKey& key,
                                     void* scratch, int64_t* op_ns, DecodeTiming* decode) const {
  const bool timed = op_ns != nullptr && TimesSample(key.index);
  char* base = static_cast<char*>(scratch);
  char* halves[2] = {base, base + scratch_half_};
  if (first == 0 && fused_ops_ > 0) {
    // DecodeImage, RandomResizedCrop[, RandomHorizontalFlip] as one pass (the header's "Fused
    // ops"): the same draws, the same bits, no planes of the whole decoded image.
    const int64_t start = timed || decode != nullptr ? NowNs() : 0;
    const SampleBuffers io{in, in_bytes, nullptr, 0, base + 2 * scratch_half_};
    // The crop's window is drawn from the image's declared size, and a JPEG decodes only the
    // window (DecodeImage::DecodeJpegWindow); a PNG decodes whole and the crop reads its window.
    SampleRandom crop_rng(key, 1);
    std::optional<DecodeImage::Window> window;
    if (window_decode_) {
      std::optional<ResizeCropPlan> unused;
      ASSIGN_OR_RETURN(window, DecodeWindow(io, key, &unused));
    }
    absl::StatusOr<transforms_internal::InterleavedU8Image> image =
        window.has_value() ? window->image : decode_->DecodeInterleaved(specs_[0], io);
    if (!image.ok()) {
      return absl::DataLossError(
          absl::StrCat(spec_.op(0).Identity(), ": ", image.status().message()));
    }
    if (decode != nullptr) {
      SpinFor(decode->delay_us);  // the injected delay is part of the decode's span
      const uint64_t channels = specs_[1].channels;
      const uint64_t whole = uint64_t{image->height} * image->width;
      *decode =
          window.has_value()
              ? DecodeTiming{decode->delay_us, start, NowNs(), window->decoded_pixels * channels,
                             window->stored_pixels * channels}
              : DecodeTiming{decode->delay_us, start, NowNs(), whole * channels,
                             decode_->StoredPixels(in, in_bytes, whole) * channels};
    }
    const int64_t decoded = timed ? (decode != nullptr ? decode->end_ns : NowNs()) : 0;
    bool mirror = false;
    if (flip_ != nullptr) {
      SampleRandom flip_rng(key, 2);
      mirror = flip_->Flips(flip_rng);
    }
    void* out = fused_ops_ == spec_.size() ? dst : halves[(fused_ops_ - 1) % 2];
    if (window.has_value()) {
      crop_->ResizeWindow(*image, specs_[2].channels, mirror, static_cast<uint8_t*>(out));
    } else {
      crop_->ApplyInterleaved(*image, specs_[2].channels, mirror, crop_rng,
                              static_cast<uint8_t*>(out));
    }
    if (timed) {
      op_ns[0] += decoded - start;
      op_ns[1] += NowNs() - decoded;
    }
    first = fused_ops_;
    actual = specs_[first];
    in = out;
    in_bytes = actual.bytes();
  }
  if (first == 0 && resize_crop_ != nullptr) {
    // DecodeImage, Resize, CenterCrop: a JPEG decodes only the source window the crop's part of
    // the resize reads, and only that part is resized, into the crop's output (the header's
    // "Resize then CenterCrop"). A PNG, or a crop that pads, goes the usual way below; such a
    // JPEG's window is the whole image, split into planes as the decoder's output.
    const int64_t start = timed || decode != nullptr ? NowNs() : 0;
    const SampleBuffers io{in, in_bytes, nullptr, 0, base + 2 * scratch_half_};
    std::optional<ResizeCropPlan> plan;
    ASSIGN_OR_RETURN(const std::optional<DecodeImage::Window> window, DecodeWindow(io, key, &plan));
    if (window.has_value()) {
      if (decode != nullptr) {
        SpinFor(decode->delay_us);  // the injected delay is part of the decode's span
        const uint64_t channels = specs_[1].channels;
        *decode = DecodeTiming{decode->delay_us, start, NowNs(), window->decoded_pixels * channels,
                               window->stored_pixels * channels};
      }
      const int64_t decoded = timed ? (decode != nullptr ? decode->end_ns : NowNs()) : 0;
      if (timed) op_ns[0] += decoded - start;
      if (plan) {
        void* out = spec_.size() == 3 ? dst : halves[0];
        transforms_internal::ResizeInterleavedU8Region(
            window->image, specs_[3].channels, -int64_t{plan->source.y}, -int64_t{plan->source.x},
            plan->height, plan->width, plan->resized_h, plan->resized_w, plan->part.y, plan->part.x,
            plan->part.height, plan->part.width, static_cast<uint8_t*>(out));
        if (timed) op_ns[1] += NowNs() - decoded;
        first = 3;
        actual = specs_[3];
        in = out;
        in_bytes = actual.bytes();
      } else {
        actual = resize_decode_->SplitPlanes(window->image, halves[0]);
        first = 1;
        in = halves[0];
        in_bytes = actual.bytes();
      }
    }
  }
  if (first == 0 && center_ != nullptr) {
    // DecodeImage, CenterCrop: a JPEG decodes only the part the crop keeps, split into planes
    // as the decoder's output; the crop then runs on it as on the whole image, with the same
    // pixels out (CenterCrop::SourceWindow). A PNG goes the usual way below.
    const int64_t start = timed || decode != nullptr ? NowNs() : 0;
    const SampleBuffers io{in, in_bytes, nullptr, 0, base + 2 * scratch_half_};
    std::optional<ResizeCropPlan> unused;
    ASSIGN_OR_RETURN(const std::optional<DecodeImage::Window> window,
                     DecodeWindow(io, key, &unused));
    if (window.has_value()) {
      actual = center_decode_->SplitPlanes(window->image, halves[0]);
      if (decode != nullptr) {
        SpinFor(decode->delay_us);  // the injected delay is part of the decode's span
        const uint64_t channels = actual.channels;
        *decode = DecodeTiming{decode->delay_us, start, NowNs(), window->decoded_pixels * channels,
                               window->stored_pixels * channels};
      }
      if (timed) op_ns[0] += (decode != nullptr ? decode->end_ns : NowNs()) - start;
      first = 1;
      in = halves[0];
      in_bytes = actual.bytes();
    }
  }
  for (size_t i = first; i < spec_.size(); ++i) {
    const bool last = i + 1 == spec_.size();
    void* out = last ? dst : halves[i % 2];
    SampleRandom rng(key, i);
    const bool decoding = i == 0 && decode != nullptr;
    const int64_t start = timed || decoding ? NowNs() : 0;
    if (i < variable_ops_) {
      const SampleBuffers io{in, in_bytes, out, last ? output_spec().bytes() : scratch_half_,
                             base + 2 * scratch_half_};
      absl::StatusOr<SampleSpec> next = spec_.op(i).ApplyVariable(actual, io, rng);
      if (!next.ok()) {
        return absl::DataLossError(
            absl::StrCat(spec_.op(i).Identity(), ": ", next.status().message()));
      }
      actual = *next;
    } else {
      spec_.op(i).ApplyWithScratch(specs_[i], in, out, rng, base + 2 * scratch_half_);
      actual = specs_[i + 1];
    }
    if (decoding) {
      SpinFor(decode->delay_us);  // the injected delay is part of the decode's span
      // A draft decodes a reduced image: the stored one is the header's size.
      const uint64_t pixels = uint64_t{actual.height} * actual.width;
      const uint64_t stored =
          first_decode_ != nullptr ? first_decode_->StoredPixels(in, in_bytes, pixels) : pixels;
      *decode = DecodeTiming{decode->delay_us, start, NowNs(), actual.bytes(),
                             actual.bytes() / std::max<uint64_t>(1, pixels) * stored};
      if (timed) op_ns[i] += decode->end_ns - start;
    } else if (timed) {
      op_ns[i] += NowNs() - start;
    }
    in = out;
    in_bytes = actual.bytes();
  }
  if (!(actual == output_spec())) {
    return absl::InternalError(absl::StrCat("the chain produced ", SampleSpecString(actual),
                                            "; it declared ", SampleSpecString(output_spec())));
  }
  return absl::OkStatus();
}

}  // namespace sluice
