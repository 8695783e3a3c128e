// Sample and label conversion of the assemble stage: stored HWC samples to CHW batch samples,
// u8 -> u8 / f16 / f32 normalized per channel as (x/255 - mean[c])/std[c], f32 -> f32 / f16 as
// (x - mean[c])/std[c], labels u8 / i32 -> int32. Public so
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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/batch.h"
#include "pipeline/sample_spec.h"
#include "storage/frame_view.h"
#include "storage/shard_format.h"

namespace sluice {

// The scalar references (what the tests compare against), for a value of channel c.
inline float NormalizeU8(uint8_t x, float mean, float std) {
  return (static_cast<float>(x) / 255.0f - mean) / std;
}
inline float NormalizeU8(uint8_t x, const Normalization& n, size_t channel = 0) {
  return NormalizeU8(x, n.mean_of(channel), n.std_of(channel));
}
inline float NormalizeF32(float x, const Normalization& n, size_t channel = 0) {
  return (x - n.mean_of(channel)) / n.std_of(channel);
}
uint16_t FloatToHalf(float f);

// Converts stored samples (channels last, HWC: docs/formats/shard.md) into batch samples
// (channels first, CHW), normalizing each channel with its own mean and std. One channel: HWC
// and CHW are the same bytes, and whole runs of samples go through one kernel call. Several
// channels: each output plane is contiguous, so each channel's values are gathered from the
// interleaved input in short runs and go through that channel's proven kernel.
class SampleConverter {
 public:
  // A vector kernel (convert.cc): converts the first n - n % 8 of n values and returns how many
  // it converted; the caller converts the rest from the table.
  using VectorKernel = size_t (*)(const uint8_t* in, void* out, size_t n, float mean, float k);

  // kInvalidArgument for u8 output from f32 samples, an h2d format other than u8/f16/f32, or a
  // normalization CheckNormalization refuses for the record's channels.
  static absl::StatusOr<SampleConverter> Create(const RecordSpec& stored, H2DFormat format,
                                                const Normalization& norm);
  // One channel of `values` values per sample (no shape).
  static absl::StatusOr<SampleConverter> Create(SampleDType source, H2DFormat format,
                                                const Normalization& norm, size_t values);
  // Converts `count` consecutive samples at `src` into `dst`.
  void Convert(const char* src, void* dst, size_t count) const;
  size_t out_bytes_per_sample() const { return out_.bytes(); }
  size_t in_bytes_per_sample() const { return out_.values() * SampleDTypeSize(source_); }
  // What a converted sample is: the batch's sample spec (CHW, dtype the h2d format).
  const SampleSpec& out_spec() const { return out_; }
  // Which implementation Convert() runs: "memcpy", "avx2+fma", "avx2+fma+f16c", "portable"
  // (the cloned u8 -> f32 loop), "table" or "scalar" (f32 samples); with several channels, the
  // first channel's (each channel's kernel is proven on its own).
  absl::string_view kernel_name() const;

 private:
  // One channel's proven conversion of u8 values.
  struct ChannelKernel {
    float mean = 0.0f;
    float std = 1.0f;
    bool identity = false;                 // mean 0, std 1 (ToTensor)
    bool fast_f32 = false;                 // the vectorized formula matches for all 256 inputs
    VectorKernel vector_kernel = nullptr;  // the proven AVX2 kernel, or null
    float kernel_k = 1.0f;                 // the kernel's 1/std or std
    float lut_f32[256] = {};
    uint16_t lut_f16[256] = {};
  };
  static ChannelKernel MakeChannelKernel(float mean, float std, H2DFormat format);
  // n u8 values of one channel, contiguous in and out.
  void ConvertU8Run(const ChannelKernel& k, const uint8_t* in, void* dst, size_t n) const;
  void ConvertU8Interleaved(const uint8_t* in, char* out) const;  // one HWC sample to CHW
  void ConvertF32(const char* src, void* dst, size_t count) const;

  SampleDType source_ = SampleDType::kU8;
  SampleSpec out_;
  std::vector<ChannelKernel> channels_;  // one per channel
};

// Labels of `count` records to int32.
void ConvertLabels(LabelDType type, const char* src, int32_t* dst, size_t count);

// Gathers record `offset` of a decoded frame into one batch position: its converted sample at
// `sample_out`, its label at `label_out`. The assemble stage calls this per sample.
inline void GatherRecord(const SampleConverter& conv, LabelDType label_type, const FrameView& frame,
                         uint32_t offset, char* sample_out, int32_t* label_out) {
  conv.Convert(frame.sample(offset), sample_out, 1);
  ConvertLabels(label_type, frame.label(offset), label_out, 1);
}

}  // namespace sluice

#endif  // SLUICE_PIPELINE_CONVERT_H_
