// Sample and label conversion of the assemble stage: stored HWC samples to CHW batch samples
// (or HWC ones: channels_last batches of sluice.Loader), u8 -> u8 / f16 / bf16 / f32 normalized
// per channel as (x/255 - mean[c])/std[c], f32 -> f32 / f16 / bf16 as (x - mean[c])/std[c],
// labels u8 / i32 -> int32. Public so
// that the diagnostics (the preprocess ceiling) time the very code the pipeline runs.
//
// u8 -> f32 and u8 -> f16 run an AVX2 + FMA (+ F16C) kernel on CPUs that have it, once
// Create() has run it on all 256 inputs and found every output bit-identical to the scalar
// reference; otherwise u8 -> f32 uses a portable vectorizable formula (proven the same way)
// and u8 -> f16 a 256-entry table computed with the scalar formula itself. f16 is IEEE
// binary16, rounded to nearest even. The output never depends on which one runs. u8 -> bf16 is
// a 256-entry table of the f32 reference rounded as torch rounds (FloatToBFloat16): a bf16
// batch is bitwise the f32 batch's .to(torch.bfloat16).
#ifndef SLUICE_PIPELINE_CONVERT_H_
#define SLUICE_PIPELINE_CONVERT_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
// FloatToBFloat16 of the n float32 values at `in` (any alignment; an AVX2 loop where the CPU
// has it: the same bits).
void F32ToBf16(const void* in, uint16_t* out, size_t n);
// torch's round_to_nearest_even (c10/util/BFloat16.h); NaN gives the quiet NaN 0x7fc0.
inline uint16_t FloatToBFloat16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + (((x >> 16) & 1u) + 0x7fffu)) >> 16);
}

// Converts stored samples (channels last, HWC: docs/formats/shard.md) into batch samples
// (channels first, CHW, unless `layout` asks for HWC), normalizing each channel with its own
// mean and std. One channel: HWC and CHW are the same bytes, and whole runs of samples go
// through one kernel call. Several channels: each channel's values are gathered from the
// interleaved input in short runs and go through that channel's proven kernel, into its
// contiguous output plane (CHW) or back to every C-th value (HWC).
class SampleConverter {
 public:
  // A vector kernel (convert.cc): converts the first n - n % 8 of n values and returns how many
  // it converted; the caller converts the rest from the table.
  using VectorKernel = size_t (*)(const uint8_t* in, void* out, size_t n, float mean, float k);

  // kInvalidArgument for u8 output from f32 samples or a normalization CheckNormalization
  // refuses for the record's channels. bf16 output and the HWC layout are sluice.Loader's
  // (dtype=torch.bfloat16, memory_format=torch.channels_last); sluice-train's engine reads
  // CHW u8/f16/f32 batches only, and its flags cannot ask for either.
  static absl::StatusOr<SampleConverter> Create(const RecordSpec& stored, H2DFormat format,
                                                const Normalization& norm,
                                                SampleLayout layout = SampleLayout::kCHW);
  // One channel of `values` values per sample (no shape).
  static absl::StatusOr<SampleConverter> Create(SampleDType source, H2DFormat format,
                                                const Normalization& norm, size_t values);
  // Converts `count` consecutive samples at `src` into `dst`.
  void Convert(const char* src, void* dst, size_t count) const;
  // One u8 sample given channels first (C planes: a chain's u8 output) into `dst` in this
  // converter's output layout and dtype, each channel normalized as Convert does (the same
  // bits): a channels_last batch of a chain that outputs u8, written in one pass.
  void ConvertPlanar(const char* src, void* dst) const;
  size_t out_bytes_per_sample() const { return out_.bytes(); }
  size_t in_bytes_per_sample() const { return out_.values() * SampleDTypeSize(source_); }
  // What a converted sample is: the batch's sample spec (its layout, dtype the h2d format).
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
    bool identity = false;  // mean 0, std 1 (ToTensor)
    bool fast_f32 = false;  // the vectorized formula matches for all 256 inputs
    // The proven AVX2 kernel, or null: f16's for f16 batches, f32's for f32 and bf16 ones.
    VectorKernel vector_kernel = nullptr;
    float kernel_k = 1.0f;  // the kernel's 1/std or std
    float lut_f32[256] = {};
    uint16_t lut_f16[256] = {};
    uint16_t lut_bf16[256] = {};
  };
  static ChannelKernel MakeChannelKernel(float mean, float std, H2DFormat format);
  // Values converted through an L1 run at a time (bf16 from f32, interleaving).
  static constexpr size_t kConvertRun = 256;
  // n u8 values of one channel, contiguous in and out.
  void ConvertU8Run(const ChannelKernel& k, const uint8_t* in, void* dst, size_t n) const;
  // The same to f32 whatever the batch's dtype (f32 and bf16 batches: k's kernel is f32's).
  static void ConvertU8RunF32(const ChannelKernel& k, const uint8_t* in, float* out, size_t n);
  void ConvertU8ToHwc3(const uint8_t* in, char* out) const;  // 3 channels to f32/bf16 HWC
  // n pixels' u8 values of channels 0, 1, 2 (contiguous runs) to n f32/bf16 HWC pixels.
  void Hwc3FromRuns(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t n,
                    char* out) const;
  void ConvertU8Interleaved(const uint8_t* in, char* out) const;  // one HWC sample to CHW/HWC
  void ConvertF32(const char* src, void* dst, size_t count) const;

  SampleDType source_ = SampleDType::kU8;
  SampleSpec out_;
  std::vector<ChannelKernel> channels_;  // one per channel
};

// One sample of `channels` planes of `plane` values of `elem_size` (1, 2 or 4) bytes each, CHW
// at `in`, written HWC at `out` (channels_last batches from a chain's CHW output).
void ChwToHwc(const char* in, char* out, size_t channels, size_t plane, size_t elem_size);

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
