#include "pipeline/batch_format.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

constexpr size_t kAlign = 64;
size_t Aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// How the caller spells the settings the rules name.
struct Names {
  std::string transforms, h2d, normalize;
};
Names NamesFor(SettingNames names) {
  if (names == SettingNames::kFlags) {
    return {"--transforms", "--h2d-format", "--normalize-mean/--normalize-std"};
  }
  return {"transforms", "dtype", "normalize"};  // sluice.Loader's arguments
}

absl::Status Prefixed(const std::string& what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// The h2d format a chain's float output (f32 or f16) goes to, or the refusal naming both
// settings. A normalization is refused: the chain's float output is what the model reads.
absl::StatusOr<H2DFormat> FormatForFloatOutput(const SampleSpec& out, const BatchFormat& format,
                                               const Names& n) {
  const std::string outputs = absl::StrCat(n.transforms, " outputs ", SampleSpecString(out));
  if (!format.normalization.is_identity()) {
    return absl::InvalidArgumentError(
        absl::StrCat(outputs, " samples and ", n.normalize,
                     " is set: the float samples would be normalized twice; normalize in the chain "
                     "(Normalize(mean=..., std=...)) and leave ",
                     n.normalize, " at 0 and 1"));
  }
  if (out.dtype == ElementType::kF32) {
    if (format.h2d_auto) return format.h2d_format == H2DFormat::kF16 ? H2DFormat::kF16 : out.dtype;
    if (format.h2d_format == H2DFormat::kU8) {
      return absl::InvalidArgumentError(absl::StrCat(
          outputs, " samples; ", n.h2d, " u8 cannot hold them: use f32 or f16 (or auto)"));
    }
    return format.h2d_format;
  }
  if (format.h2d_auto || format.h2d_format == out.dtype) return out.dtype;
  return absl::InvalidArgumentError(absl::StrCat(
      outputs, " samples; ", n.h2d, " ", H2DFormatName(format.h2d_format),
      " does not match them: use f16 (or auto), or end the chain with ToDtype(float32)"));
}

constexpr char kEncodedExample[] = "'DecodeImage(), RandomResizedCrop(224), ...'";

// The chain's input for `stored`: its sample as CHW in its dtype, or the bounded encoded spec.
SampleSpec ChainInput(const RecordSpec& stored, const std::optional<ImageSizeBound>& bound) {
  if (stored.encoded()) return EncodedChainInput(bound);
  SampleSpec input = StoredSampleSpec(stored);
  input.layout = SampleLayout::kCHW;
  return input;
}

// Encoded records need a chain that decodes them first.
absl::Status CheckDecodesFirst(const RecordSpec& stored, const TransformSpec& ops, const Names& n) {
  const std::string what = absl::StrCat("the split stores encoded images (",
                                        SampleEncodingName(stored.encoding), " files)");
  if (ops.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " and ", n.transforms, " is empty; set ", n.transforms,
                     " starting with DecodeImage() and fixing the size, e.g. ", kEncodedExample));
  }
  if (!absl::StartsWith(ops.op(0).Identity(), "DecodeImage")) {
    return absl::InvalidArgumentError(
        absl::StrCat(n.transforms, ": ", what, " but the chain starts with ", ops.op(0).Identity(),
                     "; start it with DecodeImage(), e.g. ", kEncodedExample));
  }
  return absl::OkStatus();
}

}  // namespace

SampleSpec EncodedChainInput(const std::optional<ImageSizeBound>& bound) {
  // The area bound sizes the scratch: a 60000x1 and a 1x60000 image need 60000 pixels of it,
  // not the 3.6e9 of the box of their largest sides.
  if (bound) return EncodedSampleSpec(bound->max_height, bound->max_width, bound->max_pixels);
  return EncodedSampleSpec(kDefaultMaxImageSide, kDefaultMaxImageSide);
}

absl::StatusOr<ResolvedBatchFormat> ResolveBatchFormat(
    const RecordSpec& stored, const BatchFormat& format, SettingNames names,
    const std::optional<ImageSizeBound>& image_bound) {
  const Names n = NamesFor(names);
  ResolvedBatchFormat r;
  r.h2d_format = format.h2d_format;
  const SampleSpec input = ChainInput(stored, image_bound);
  if (format.transforms.empty()) {
    if (stored.encoded()) RETURN_IF_ERROR(CheckDecodesFirst(stored, format.transforms, n));
    if (stored.sample_dtype == SampleDType::kF32 && r.h2d_format == ElementType::kU8) {
      return absl::InvalidArgumentError(
          absl::StrCat(n.h2d, " u8 needs u8 samples; this split stores f32 (use f32 or f16)"));
    }
    r.sample = input;
    r.sample.dtype = r.h2d_format;
    r.sample.layout = format.layout;
    return r;
  }
  if (stored.encoded()) RETURN_IF_ERROR(CheckDecodesFirst(stored, format.transforms, n));
  auto chain = TransformChain::Create(format.transforms, input);
  if (!chain.ok()) return Prefixed(n.transforms, chain.status());
  r.chain = std::make_shared<const TransformChain>(std::move(*chain));
  const SampleSpec& out = r.chain->output_spec();
  switch (out.dtype) {
    case ElementType::kU8:
      if (absl::Status s = CheckNormalization(format.normalization, out.channels); !s.ok()) {
        return Prefixed(absl::StrCat(n.normalize, " (the samples after ", n.transforms, " are ",
                                     SampleSpecString(out), ")"),
                        s);
      }
      break;
    case ElementType::kBF16:
      // bf16 batches only when asked for by name (sluice.Loader's dtype=torch.bfloat16), never
      // by --h2d-format auto: sluice-train's engine reads u8, f16 or f32.
      if (format.h2d_format == ElementType::kBF16 && !format.h2d_auto) {
        ASSIGN_OR_RETURN(r.h2d_format, FormatForFloatOutput(out, format, n));
        break;
      }
      if (names == SettingNames::kPythonArguments) {
        return absl::InvalidArgumentError(
            absl::StrCat(n.transforms, " outputs ", SampleSpecString(out), " samples; ", n.h2d, " ",
                         H2DFormatName(format.h2d_format),
                         " does not match them: pass dtype=torch.bfloat16, or end the chain with "
                         "ToDtype(float32)"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat(n.transforms, " outputs ", SampleSpecString(out), " samples; bf16 is not ",
                       "an h2d format (", n.h2d, " takes u8, f16 or f32): end the chain with ",
                       "ToDtype(float16) or ToDtype(float32)"));
    case ElementType::kF16:
    case ElementType::kF32: {
      ASSIGN_OR_RETURN(r.h2d_format, FormatForFloatOutput(out, format, n));
      break;
    }
  }
  r.sample = out;
  r.sample.dtype = r.h2d_format;
  r.sample.layout = format.layout;
  return r;
}

absl::StatusOr<ChainPreprocessor> ChainPreprocessor::Create(const RecordSpec& stored,
                                                            const ResolvedBatchFormat& format,
                                                            const Normalization& normalization) {
  if (format.chain == nullptr) return absl::InvalidArgumentError("no transforms to apply");
  ChainPreprocessor p;
  p.chain_ = format.chain;
  const H2DFormat stored_type =
      stored.sample_dtype == SampleDType::kU8 ? H2DFormat::kU8 : H2DFormat::kF32;
  if (!stored.encoded()) {
    ASSIGN_OR_RETURN(SampleConverter to_chw,
                     SampleConverter::Create(stored, stored_type, Normalization{}));
    p.to_chw_.emplace(std::move(to_chw));
  }
  const SampleSpec& out = p.chain_->output_spec();
  const SampleSpec& batch = format.sample;
  p.out_dtype_ = batch.dtype;
  // channels_last batches of a chain's u8 output: converted and interleaved in one pass.
  const bool planar = batch.layout == SampleLayout::kHWC && out.channels > 1 &&
                      out.dtype == ElementType::kU8 && batch.dtype != ElementType::kU8;
  if (planar) {
    RecordSpec planes;
    planes.height = out.height;
    planes.width = out.width;
    planes.channels = out.channels;
    ASSIGN_OR_RETURN(
        SampleConverter conv,
        SampleConverter::Create(planes, batch.dtype, normalization, SampleLayout::kHWC));
    p.planar_.emplace(std::move(conv));
  } else if (out.dtype != batch.dtype) {
    const SampleDType source = out.dtype == ElementType::kU8 ? SampleDType::kU8 : SampleDType::kF32;
    const bool per_plane = out.dtype == ElementType::kU8 &&
                           (normalization.mean.size() > 1 || normalization.std.size() > 1);
    if (out.dtype != ElementType::kU8 && out.dtype != ElementType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("cannot convert the chain's ",
                                                     SampleSpecString(out), " output to ",
                                                     ElementTypeName(batch.dtype)));
    }
    const size_t run = per_plane ? out.plane_values() : out.values();
    const uint32_t runs = per_plane ? out.channels : 1;
    for (uint32_t c = 0; c < runs; ++c) {
      const Normalization norm =
          per_plane ? Normalization{{normalization.mean_of(c)}, {normalization.std_of(c)}}
          : out.dtype == ElementType::kU8 ? normalization
                                          : Normalization{};
      ASSIGN_OR_RETURN(SampleConverter conv,
                       SampleConverter::Create(source, batch.dtype, norm, run));
      p.out_converters_.push_back(std::move(conv));
    }
    p.out_plane_bytes_in_ = run * ElementSize(out.dtype);
    p.out_plane_bytes_out_ = run * ElementSize(batch.dtype);
  }
  // channels_last batches: the chain's CHW output (converted to the batch's dtype in scratch
  // when it differs) is transposed into the batch.
  p.to_hwc_ = batch.layout == SampleLayout::kHWC && out.channels > 1;
  // Encoded records go to the chain as they lie in the frame: no CHW copy in the scratch.
  p.chain_out_offset_ = stored.encoded() ? 0 : Aligned(p.chain_->input_spec().bytes());
  const bool chain_to_scratch = !p.out_converters_.empty() || p.to_hwc_ || p.planar_.has_value();
  p.converted_offset_ = p.chain_out_offset_ + (chain_to_scratch ? Aligned(out.bytes()) : 0);
  const bool convert_to_scratch = !p.out_converters_.empty() && p.to_hwc_;
  p.chain_scratch_offset_ = p.converted_offset_ + (convert_to_scratch ? Aligned(batch.bytes()) : 0);
  return p;
}

absl::Status ChainPreprocessor::Process(const char* stored, size_t stored_bytes, char* out,
                                        const SampleKey& key, char* scratch, int64_t* op_ns,
                                        DecodeTiming* decode) const {
  char* chain_scratch = scratch + chain_scratch_offset_;
  char* dst = out_converters_.empty() && !to_hwc_ ? out : scratch + chain_out_offset_;
  if (to_chw_.has_value()) {
    to_chw_->Convert(stored, scratch, 1);
    chain_->Apply(scratch, dst, key, chain_scratch, op_ns);
  } else {
    RETURN_IF_ERROR(
        chain_->ApplyRecord(stored, stored_bytes, dst, key, chain_scratch, op_ns, decode));
  }
  ConvertOut(dst, out, scratch);
  return absl::OkStatus();
}

absl::Status ChainPreprocessor::ProcessDecoded(const SampleSpec& decoded, const char* pixels,
                                               char* out, const SampleKey& key, char* scratch,
                                               int64_t* op_ns) const {
  char* dst = out_converters_.empty() && !to_hwc_ ? out : scratch + chain_out_offset_;
  RETURN_IF_ERROR(
      chain_->ApplyDecoded(decoded, pixels, dst, key, scratch + chain_scratch_offset_, op_ns));
  ConvertOut(dst, out, scratch);
  return absl::OkStatus();
}

void ChainPreprocessor::ConvertOut(const char* chain_out, char* out, char* scratch) const {
  if (planar_.has_value()) return planar_->ConvertPlanar(chain_out, out);
  char* converted = to_hwc_ ? scratch + converted_offset_ : out;
  for (size_t i = 0; i < out_converters_.size(); ++i) {
    out_converters_[i].Convert(chain_out + i * out_plane_bytes_in_,
                               converted + i * out_plane_bytes_out_, 1);
  }
  if (!to_hwc_) return;
  const SampleSpec& s = chain_->output_spec();
  ChwToHwc(out_converters_.empty() ? chain_out : converted, out, s.channels, s.plane_values(),
           ElementSize(out_dtype_));
}

}  // namespace sluice
