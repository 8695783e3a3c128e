// Engine benchmarks: one CPU training step of the reference model (784-128-10, SGD lr 0.01) on
// u8 batches, items/s = samples/s, with the batch split across `threads` threads
// (BackendOptions::threads). Inputs are synthetic 28x28 images with about half of the pixels
// zero, like Fashion-MNIST (49.5% nonzero), since the CPU backend's first layer skips zero
// pixels; BM_CpuTrainStep_Dense uses inputs with no zeros (the sgemm path). BM_CpuTrainStep_Wide
// is 784-4096-4096-10 at batch 1024 (GEMM-bound: how the split scales with cores).
// BM_CpuTrainStep_StoredGradient is FashionLike with CpuBackendOptions::fused_sgd off: the
// gradient stored, then stepped, as data-parallel runs do (what the fused step saves).
//   ./build/bench/engine_benchmark --benchmark_filter=CpuTrainStep
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model.h"

namespace sluice {
namespace {

constexpr int kPool = 4096;  // samples cycled through, so inputs vary between steps

std::vector<uint8_t> MakeImages(double nonzero_fraction, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> images(int64_t{kPool} * 784);
  for (auto& px : images) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    px = u < nonzero_fraction ? static_cast<uint8_t>(1 + rng() % 255) : 0;
  }
  return images;
}

void RunTrainStep(benchmark::State& state, double nonzero_fraction,
                  std::vector<int> layers = ModelConfig{}.layers, bool fused_sgd = true) {
  const int batch = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  ModelConfig model;
  model.layers = std::move(layers);
  OptimizerConfig opt;
  BackendOptions options;
  options.max_batch = batch;
  auto backend = CreateCpuBackend(InitModelState(model, opt, 1), opt, options,
                                  {.threads = threads, .fused_sgd = fused_sgd});
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return;
  }
  const std::vector<uint8_t> images = MakeImages(nonzero_fraction, 7);
  std::vector<int32_t> labels(kPool);
  for (int i = 0; i < kPool; ++i) labels[i] = i % 10;
  int offset = 0;
  for (auto _ : state) {
    BatchView view;
    view.sample.dtype = H2DFormat::kU8;
    view.samples = images.data() + int64_t{offset} * 784;
    view.labels = labels.data() + offset;
    view.size = batch;
    view.sample = FlatSampleSpec(view.sample.dtype, 784);
    auto status = (*backend)->TrainStep(view, 0.01f);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    offset = (offset + batch) % (kPool - batch + 1);
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetLabel((*backend)->name());
}

void BM_CpuTrainStep_FashionLike(benchmark::State& state) { RunTrainStep(state, 0.495); }
void BM_CpuTrainStep_Dense(benchmark::State& state) { RunTrainStep(state, 1.0); }
void BM_CpuTrainStep_StoredGradient(benchmark::State& state) {
  RunTrainStep(state, 0.495, ModelConfig{}.layers, /*fused_sgd=*/false);
}
void BM_CpuTrainStep_Wide(benchmark::State& state) {
  RunTrainStep(state, 0.495, {784, 4096, 4096, 10});
}

// Batches of 32 and 256 on 1 and 2 threads, timed on the wall clock.
void StepSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads"})
      ->Args({32, 1})
      ->Args({32, 2})
      ->Args({256, 1})
      ->Args({256, 2})
      ->UseRealTime();
}

BENCHMARK(BM_CpuTrainStep_FashionLike)->Apply(StepSizes);
BENCHMARK(BM_CpuTrainStep_StoredGradient)->Apply(StepSizes);
BENCHMARK(BM_CpuTrainStep_Dense)->Apply(StepSizes);
// About a second per step on one core: a few steps are enough.
BENCHMARK(BM_CpuTrainStep_Wide)
    ->ArgNames({"batch", "threads"})
    ->Args({1024, 1})
    ->Args({1024, 2})
    ->Iterations(4)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
