// The preprocess cost of one sample with a transform chain against a plain normalize of the
// same bytes (issue 22's "at most 2x"): ChainPreprocessor::Process, what the gather runs per
// sample, over a buffer of 3x32x32 u8 records stored HWC (CIFAR's shape), into f32 batches.
//
//   build/bench/transforms_benchmark --benchmark_min_time=0.5
//
// BM_Preprocess_NoChain: the path without transforms (SampleConverter: HWC -> CHW and the
// per-channel normalize in one pass). BM_Preprocess_Chain/<chain>: the chain's path.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "pipeline/batch_format.h"
#include "pipeline/convert.h"
#include "pipeline/transforms/transform_spec.h"

namespace sluice {
namespace {

constexpr size_t kRecords = 4096;  // 12 MB of samples: beyond the caches, as a shuffle window
const Normalization kNorm{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};

RecordSpec Cifar() {
  RecordSpec r;
  r.height = 32;
  r.width = 32;
  r.channels = 3;
  return r;
}

std::vector<uint8_t> Records() {
  std::vector<uint8_t> v(kRecords * Cifar().sample_bytes());
  std::mt19937 rng(1);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

void BM_Preprocess_NoChain(benchmark::State& state) {
  const RecordSpec spec = Cifar();
  const std::vector<uint8_t> records = Records();
  auto conv = SampleConverter::Create(spec, H2DFormat::kF32, kNorm);
  if (!conv.ok()) return state.SkipWithError(std::string(conv.status().message()).c_str());
  std::vector<float> out(spec.sample_values());
  size_t i = 0;
  for (auto _ : state) {
    conv->Convert(reinterpret_cast<const char*>(records.data()) + i * spec.sample_bytes(),
                  out.data(), 1);
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % kRecords;
  }
  state.SetItemsProcessed(state.iterations());
}

const char* const kChains[] = {
    "Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.247, 0.2435, 0.2616])",
    "RandomCrop(32, padding=4), RandomHorizontalFlip(), "
    "Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.247, 0.2435, 0.2616])",
};

void BM_Preprocess_Chain(benchmark::State& state) {
  const RecordSpec spec = Cifar();
  const std::vector<uint8_t> records = Records();
  BatchFormat format;
  format.h2d_format = H2DFormat::kF32;
  auto chain = TransformSpec::Parse(kChains[state.range(0)]);
  if (!chain.ok()) return state.SkipWithError(std::string(chain.status().message()).c_str());
  format.transforms = *chain;
  auto resolved = ResolveBatchFormat(spec, format, SettingNames::kFlags);
  if (!resolved.ok()) return state.SkipWithError(std::string(resolved.status().message()).c_str());
  auto pre = ChainPreprocessor::Create(spec, *resolved, Normalization{});
  if (!pre.ok()) return state.SkipWithError(std::string(pre.status().message()).c_str());
  std::vector<char> scratch(pre->scratch_bytes() + 64);
  char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  std::vector<float> out(resolved->sample.values());
  std::vector<int64_t> op_ns(pre->chain().size());
  size_t i = 0;
  uint64_t index = 0;
  for (auto _ : state) {
    pre->Process(reinterpret_cast<const char*>(records.data()) + i * spec.sample_bytes(),
                 spec.sample_bytes(), reinterpret_cast<char*>(out.data()), SampleKey{7, 0, index++},
                 aligned, op_ns.data())
        .IgnoreError();  // fixed-size records: always OK
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % kRecords;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) == 0 ? "Normalize" : "RandomCrop+Flip+Normalize");
}

// BM_Preprocess_Layout/<kind>/<chain>: sluice.Loader's batch kinds, 0: f32 CHW, 1: bf16 CHW,
// 2: f32 channels_last (HWC), 3: bf16 channels_last; chain 0: none (SampleConverter), 1:
// RandomCrop + flip with the normalization after the chain (u8 output, converted per plane),
// 2: RandomCrop + flip + Normalize in the chain (f32 output). What bench/loader_layouts.py
// measures end to end, here per sample on one thread.
void BM_Preprocess_Layout(benchmark::State& state) {
  const RecordSpec spec = Cifar();
  const std::vector<uint8_t> records = Records();
  const int kind = static_cast<int>(state.range(0));
  const int chain_index = static_cast<int>(state.range(1));
  BatchFormat format;
  format.h2d_format = kind % 2 == 0 ? ElementType::kF32 : ElementType::kBF16;
  format.layout = kind < 2 ? SampleLayout::kCHW : SampleLayout::kHWC;
  const char* const chains[] = {"", "RandomCrop(32, padding=4), RandomHorizontalFlip()",
                                kChains[1]};
  auto chain = TransformSpec::Parse(chains[chain_index]);
  if (!chain.ok()) return state.SkipWithError(std::string(chain.status().message()).c_str());
  format.transforms = *chain;
  const Normalization norm = chain_index == 2 ? Normalization{} : kNorm;
  format.normalization = norm;
  auto resolved = ResolveBatchFormat(spec, format, SettingNames::kPythonArguments);
  if (!resolved.ok()) return state.SkipWithError(std::string(resolved.status().message()).c_str());
  std::vector<char> out(resolved->sample.bytes());
  size_t i = 0;
  uint64_t index = 0;
  const char* in = reinterpret_cast<const char*>(records.data());
  if (chain_index == 0) {
    auto conv = SampleConverter::Create(spec, format.h2d_format, norm, format.layout);
    if (!conv.ok()) return state.SkipWithError(std::string(conv.status().message()).c_str());
    for (auto _ : state) {
      conv->Convert(in + i * spec.sample_bytes(), out.data(), 1);
      benchmark::DoNotOptimize(out.data());
      i = (i + 1) % kRecords;
    }
  } else {
    auto pre = ChainPreprocessor::Create(spec, *resolved, norm);
    if (!pre.ok()) return state.SkipWithError(std::string(pre.status().message()).c_str());
    std::vector<char> scratch(pre->scratch_bytes() + 64);
    char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    std::vector<int64_t> op_ns(pre->chain().size());
    for (auto _ : state) {
      pre->Process(in + i * spec.sample_bytes(), spec.sample_bytes(), out.data(),
                   SampleKey{7, 0, index++}, aligned, op_ns.data())
          .IgnoreError();  // fixed-size records: always OK
      benchmark::DoNotOptimize(out.data());
      i = (i + 1) % kRecords;
    }
  }
  state.SetItemsProcessed(state.iterations());
  const char* const kinds[] = {"f32", "bf16", "f32 channels_last", "bf16 channels_last"};
  state.SetLabel(kinds[kind]);
}

BENCHMARK(BM_Preprocess_NoChain);
BENCHMARK(BM_Preprocess_Layout)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}});
BENCHMARK(BM_Preprocess_Chain)->Arg(0)->Arg(1);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
