// Sample and label conversion of the assemble stage: u8 -> u8 / f16 / f32 normalized as
// (x/255 - mean)/std, f32 -> f32 / f16 as (x - mean)/std, labels u8 / i32 -> int32. Public so
// that the diagnostics (the preprocess ceiling) time the very code the pipeline runs.
//
// u8 -> f32 and u8 -> f16 run an AVX2 + FMA (+ F16C) kernel on CPUs that have it, once
// Create() has run it on all 256 inputs and found every output bit-identical to the scalar
// reference; otherwise u8 -> f32 uses a portable vectorizable formula (proven the same way)
// and u8 -> f16 a 256-entry table computed with the scalar formula itself. f16 is IEEE
// binary16, rounded to nearest even. The output never depends on which one runs.
#ifndef SLUICE_PIPELINE_CONVERT_H_
#define SLUICE_PIPELINE_CONVERT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/batch.h"
#include "storage/shard_format.h"

namespace sluice {

// The scalar references (what the tests compare against).
inline float NormalizeU8(uint8_t x, const Normalization& n) {
  return (static_cast<float>(x) / 255.0f - n.mean) / n.std;
}
inline float NormalizeF32(float x, const Normalization& n) { return (x - n.mean) / n.std; }
uint16_t FloatToHalf(float f);

class SampleConverter {
 public:
  // A vector kernel (convert.cc): converts the first n - n % 8 of n values and returns how many
  // it converted; the caller converts the rest from the table.
  using VectorKernel = size_t (*)(const uint8_t* in, void* out, size_t n, float mean, float k);

  // kInvalidArgument for u8 output from f32 samples or a zero std.
  static absl::StatusOr<SampleConverter> Create(SampleDType source, H2DFormat format,
                                                Normalization norm, size_t values);
  // Converts `count` consecutive samples at `src` into `dst`.
  void Convert(const char* src, void* dst, size_t count) const;
  size_t out_bytes_per_sample() const { return values_ * H2DFormatSize(format_); }
  size_t in_bytes_per_sample() const { return values_ * SampleDTypeSize(source_); }
  // Which implementation Convert() runs: "memcpy", "avx2+fma", "avx2+fma+f16c", "portable"
  // (the cloned u8 -> f32 loop), "table" or "scalar" (f32 samples).
  absl::string_view kernel_name() const;

 private:
  SampleDType source_ = SampleDType::kU8;
  H2DFormat format_ = H2DFormat::kU8;
  Normalization norm_;
  size_t values_ = 0;
  bool identity_ = false;  // mean 0, std 1 (ToTensor)
  bool fast_f32_ = false;  // the vectorized formula matches the reference for all 256 inputs
  VectorKernel vector_kernel_ = nullptr;  // the proven AVX2 kernel, or null
  float kernel_k_ = 1.0f;                 // the kernel's 1/std or std
  float lut_f32_[256] = {};
  uint16_t lut_f16_[256] = {};
};

// Labels of `count` records to int32.
void ConvertLabels(LabelDType type, const char* src, int32_t* dst, size_t count);

// Gathers record `offset` of a decoded frame holding `records` records (the frame layout of
// docs/formats/shard.md: all samples, then all labels) into one batch position: its converted
// sample at `sample_out`, its label at `label_out`. The assemble stage calls this per sample.
inline void GatherRecord(const SampleConverter& conv, LabelDType label_type, const char* frame,
                         uint32_t records, uint32_t offset, char* sample_out, int32_t* label_out) {
  const size_t in_bytes = conv.in_bytes_per_sample();
  conv.Convert(frame + size_t{offset} * in_bytes, sample_out, 1);
  ConvertLabels(label_type,
                frame + size_t{records} * in_bytes + size_t{offset} * LabelDTypeSize(label_type),
                label_out, 1);
}

}  // namespace sluice

#endif  // SLUICE_PIPELINE_CONVERT_H_
