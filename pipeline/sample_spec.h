// The declared shape and element type of one sample as it moves through the pipeline: what the
// shard stores (RecordSpec, channels last), what each transform outputs, and what a batch
// carries to the engine and to Python (always channels first: a batch is [B, C, H, W]).
#ifndef SLUICE_PIPELINE_SAMPLE_SPEC_H_
#define SLUICE_PIPELINE_SAMPLE_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/element_type.h"
#include "storage/shard_format.h"

namespace sluice {

// ElementType and ElementSize: pipeline/element_type.h.
absl::string_view ElementTypeName(ElementType t);  // "u8" | "f16" | "bf16" | "f32"
absl::StatusOr<ElementType> ParseElementType(absl::string_view name);

// Memory order of one sample's values: channels first (C, H, W), PyTorch's convention and the
// order of every batch; or channels last (H, W, C), the order shards store (docs/formats/shard.md).
enum class SampleLayout : uint8_t { kCHW = 0, kHWC = 1 };
absl::string_view SampleLayoutName(SampleLayout l);  // "CHW" | "HWC"

// Whether a spec's height and width are every sample's (kFixed), an upper bound on each sample's
// (kVariable: decoded images before an op fixes the size), or the largest image an encoded
// record may declare (kEncoded: the bytes of a JPEG or PNG file; dtype, channels and layout
// mean nothing). bytes() is then the bound, what a buffer for any one sample needs.
enum class SampleExtent : uint8_t { kFixed = 0, kVariable = 1, kEncoded = 2 };

struct SampleSpec {
  ElementType dtype = ElementType::kU8;
  uint32_t channels = 1;
  uint32_t height = 0;
  uint32_t width = 0;
  SampleLayout layout = SampleLayout::kCHW;
  SampleExtent extent = SampleExtent::kFixed;
  // kVariable and kEncoded only (ignored when kFixed): a bound on height x width of any one
  // sample, tighter than the box height x width when the widest image is not the tallest (a
  // split of 60000x1 and 1x60000 images: 60000 pixels, not 3.6e9); 0: the box. Buffers and
  // scratch are sized from it (plane_values()). The split's sample.max_pixels.
  uint64_t max_pixels = 0;

  bool fixed() const { return extent == SampleExtent::kFixed; }
  size_t values() const { return size_t{channels} * plane_values(); }
  size_t bytes() const { return values() * ElementSize(dtype); }
  // One channel's values: height x width, or max_pixels where that bounds a varying size.
  size_t plane_values() const {
    const size_t box = size_t{height} * width;
    return !fixed() && max_pixels != 0 && max_pixels < box ? static_cast<size_t>(max_pixels) : box;
  }
  bool operator==(const SampleSpec&) const = default;
};

// "u8 3x32x32 CHW": dtype, then C x H x W, then the layout; "u8 3xHxW CHW (sizes vary, at most
// 4096x4096)" for kVariable; "encoded images (at most 4096x4096)" for kEncoded; with
// ", 60000 pixels" after the box when max_pixels bounds the area more tightly.
std::string SampleSpecString(const SampleSpec& s);

// The input of a chain that starts from encoded image records: images may declare at most
// max_height x max_width pixels, and at most max_pixels in all when it is not 0 (DecodeImage
// refuses larger ones from their header).
inline SampleSpec EncodedSampleSpec(uint32_t max_height, uint32_t max_width,
                                    uint64_t max_pixels = 0) {
  return SampleSpec{.dtype = ElementType::kU8,
                    .channels = 1,
                    .height = max_height,
                    .width = max_width,
                    .layout = SampleLayout::kCHW,
                    .extent = SampleExtent::kEncoded,
                    .max_pixels = max_pixels};
}

// A sample of `values` values with no image shape: one channel of 1 x values (feature vectors,
// engine tests and benchmarks).
inline SampleSpec FlatSampleSpec(ElementType dtype, uint32_t values) {
  return SampleSpec{.dtype = dtype, .channels = 1, .height = 1, .width = values};
}

// The spec of a stored record's sample (channels last).
SampleSpec StoredSampleSpec(const RecordSpec& r);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SAMPLE_SPEC_H_
