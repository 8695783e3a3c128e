// The CPU backend's batch split (engine/cpu/cpu_backend.cc): each of T threads runs forward and
// the backward pass through the activations on a fixed slice of the batch's rows; then each
// weight gradient is computed over the whole batch in fixed chunks of its input rows (plain SGD
// steps those rows inside the same sgemm). The rules pinned here: bitwise the same for a given
// T, for every optimizer; equal to one thread up to float summation order; every row trained
// exactly once, for odd batches and batches smaller than T; a data-parallel exchange sees the
// gradients of every slice, and an empty share still works.
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

using testing::Dataset;
using testing::MakeDataset;
using testing::U8Batch;

std::unique_ptr<Backend> MakeCpu(const ModelState& state, const OptimizerConfig& opt, int max_batch,
                                 int threads, dist::Communicator* comm = nullptr) {
  BackendOptions options;
  options.max_batch = max_batch;
  options.gradient_comm = comm;
  std::unique_ptr<Backend> backend =
      testing::MakeCpuBackend(state, opt, options, {.threads = threads});
  EXPECT_EQ(backend->compute_threads(), threads);
  return backend;
}

// |a - e| <= atol + rtol |e| for every parameter and optimizer-state value.
void ExpectStatesNear(const ModelState& a, const ModelState& e, float atol, float rtol) {
  ASSERT_EQ(a.params.size(), e.params.size());
  for (size_t p = 0; p < a.params.size(); ++p) {
    ASSERT_EQ(a.params[p].values.size(), e.params[p].values.size());
    for (size_t i = 0; i < a.params[p].values.size(); ++i) {
      const float ev = e.params[p].values[i];
      ASSERT_NEAR(a.params[p].values[i], ev, atol + rtol * std::abs(ev))
          << a.params[p].name << "[" << i << "]";
    }
  }
}

// Trains `steps` batches of `batch` from `d` (784 features) and returns the state and the
// summed loss.
ModelState Train(Backend* backend, const Dataset& d, int batch, int steps, double* mean_loss) {
  for (int s = 0; s < steps; ++s) {
    EXPECT_TRUE(backend->TrainStep(U8Batch(d, s * batch, batch, 784), 0.01f).ok());
  }
  *mean_loss = backend->TakeLoss()->mean_loss;
  return *backend->SaveState();
}

// Plain SGD (the weight step fused into the gradient's sgemm), SGD with momentum, and AdamW.
std::vector<OptimizerConfig> EveryOptimizerPath() {
  OptimizerConfig plain, momentum, adamw;
  momentum.momentum = 0.9f;
  adamw.kind = OptimizerKind::kAdamW;
  return {plain, momentum, adamw};
}

TEST(CpuBatchSplitTest, TwoThreadsTwiceGiveBitwiseIdenticalWeightsAndLoss) {
  const Dataset d = MakeDataset(4 * 33, 784, 10, 0.5, 3);
  for (const OptimizerConfig& opt : EveryOptimizerPath())
    for (int batch : {32, 33}) {
      SCOPED_TRACE(::testing::Message() << "optimizer " << static_cast<int>(opt.kind)
                                        << " momentum " << opt.momentum << ", batch " << batch);
      const ModelState init = InitModelState(ModelConfig{}, opt, 4);
      double loss_a, loss_b;
      auto a = MakeCpu(init, opt, batch, 2), b = MakeCpu(init, opt, batch, 2);
      const ModelState sa = Train(a.get(), d, batch, 4, &loss_a);
      const ModelState sb = Train(b.get(), d, batch, 4, &loss_b);
      testing::ExpectBitwiseEqual(sa, sb);
      EXPECT_EQ(loss_a, loss_b);
    }
}

TEST(CpuBatchSplitTest, SplitEqualsOneThreadUpToFloatSummationOrder) {
  // Sparse (half zero, the AVX-512 first layer where available) and dense (sgemm) inputs.
  // Not AdamW: it divides by the gradient's own magnitude, so a rounding difference in a
  // near-zero gradient becomes a difference of lr in the weight.
  for (const OptimizerConfig& opt : {EveryOptimizerPath()[0], EveryOptimizerPath()[1]})
    for (double nonzero : {0.5, 1.0}) {
      const Dataset d = MakeDataset(4 * 33, 784, 10, nonzero, 8);
      const ModelState init = InitModelState(ModelConfig{}, opt, 2);
      double loss1;
      auto one = MakeCpu(init, opt, 33, 1);
      const ModelState s1 = Train(one.get(), d, 33, 4, &loss1);
      for (int threads : {2, 3, 4}) {
        SCOPED_TRACE(::testing::Message()
                     << "optimizer " << static_cast<int>(opt.kind) << " momentum " << opt.momentum
                     << ", nonzero " << nonzero << ", " << threads << " threads");
        double loss;
        auto split = MakeCpu(init, opt, 33, threads);
        const ModelState s = Train(split.get(), d, 33, 4, &loss);
        ExpectStatesNear(s, s1, 1e-6f, 1e-5f);
        EXPECT_NEAR(loss, loss1, 1e-6 * loss1);
      }
    }
}

// A batch of 2 on 3 threads (one slice empty), after a full batch that filled every slice's
// gradients: the empty slice must add nothing, stale or not. Reference: the reference ops.
TEST(CpuBatchSplitTest, BatchSmallerThanTheThreadsTrainsEachRowOnce) {
  OptimizerConfig opt;
  ModelConfig model;
  model.layers = {40, 24, 5};
  const Dataset d = MakeDataset(12, 40, 5, 0.5, 5);
  ModelState expected = InitModelState(model, opt, 1);
  auto backend = MakeCpu(expected, opt, 9, 3);
  int first = 0;
  for (int size : {9, 2, 1}) {
    SCOPED_TRACE(size);
    const absl::Status status = backend->TrainStep(U8Batch(d, first, size, 40), 0.1f);
    ASSERT_TRUE(status.ok()) << status;
    const auto x = testing::NormalizeAll(d.images.data() + first * 40, size * 40, Normalization{});
    testing::ReferenceTrainStep(&expected, opt, x.data(), d.labels.data() + first, size, 0.1f);
    ExpectStatesNear(*backend->SaveState(), expected, 1e-5f, 1e-4f);
    first += size;
  }
  EvalStats eval;
  ASSERT_TRUE(backend->Evaluate(U8Batch(d, 0, 2, 40), &eval).ok());
  EXPECT_EQ(eval.samples, 2);
}

// A stand-in for a second rank: its share of every step has `other_samples` samples and zero
// gradients. Records the first gradient tensor it is asked to sum (the first layer's weights).
class OneOtherRank final : public dist::Communicator {
 public:
  explicit OneOtherRank(int64_t other_samples) : other_samples_(other_samples) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  std::string description() const override { return "one other rank (test)"; }
  absl::Status AllReduceSum(float* data, size_t count) override {
    if (first_gradient.empty()) first_gradient.assign(data, data + count);
    return absl::OkStatus();
  }
  absl::Status AllReduceSum(double*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(int64_t* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] += other_samples_;
    return absl::OkStatus();
  }
  absl::Status AllReduceMax(double*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override {
    return std::vector<std::string>{mine, mine};
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Duplicate() override {
    return std::unique_ptr<Communicator>(new OneOtherRank(other_samples_));
  }
  [[noreturn]] void Abort(int exit_code) override { std::_Exit(exit_code); }

  std::vector<float> first_gradient;

 private:
  const int64_t other_samples_;
};

TEST(CpuBatchSplitTest, DataParallelExchangeSeesTheSummedGradientsOfEverySlice) {
  OptimizerConfig opt;
  const Dataset d = MakeDataset(7, 784, 10, 0.5, 6);
  const ModelState init = InitModelState(ModelConfig{}, opt, 3);
  OneOtherRank comm1(5), comm2(5);
  auto one = MakeCpu(init, opt, 7, 1, &comm1);
  auto split = MakeCpu(init, opt, 7, 2, &comm2);
  ASSERT_TRUE(one->TrainStep(U8Batch(d, 0, 7, 784), 0.1f).ok());
  ASSERT_TRUE(split->TrainStep(U8Batch(d, 0, 7, 784), 0.1f).ok());
  ASSERT_EQ(comm1.first_gradient.size(), comm2.first_gradient.size());
  for (size_t i = 0; i < comm1.first_gradient.size(); ++i) {
    ASSERT_NEAR(comm2.first_gradient[i], comm1.first_gradient[i],
                1e-7f + 1e-5f * std::abs(comm1.first_gradient[i]))
        << i;
  }
  ExpectStatesNear(*split->SaveState(), *one->SaveState(), 1e-7f, 1e-5f);
}

TEST(CpuBatchSplitTest, EmptyShareOfAGlobalBatchAddsNothingAndStillSteps) {
  OptimizerConfig opt;  // plain SGD: zero gradients leave the weights as they are
  const ModelState init = InitModelState(ModelConfig{}, opt, 3);
  const Dataset d = MakeDataset(8, 784, 10, 0.5, 9);
  OneOtherRank comm(4);
  auto backend = MakeCpu(init, opt, 8, 2, &comm);
  // A full share first, so every gradient buffer holds something an empty step must not reuse.
  ASSERT_TRUE(backend->TrainStep(U8Batch(d, 0, 8, 784), 0.1f).ok());
  const ModelState before = *backend->SaveState();
  comm.first_gradient.clear();
  BatchView empty;
  empty.sample.dtype = H2DFormat::kU8;
  empty.sample = FlatSampleSpec(empty.sample.dtype, 784);
  empty.size = 0;
  ASSERT_TRUE(backend->TrainStep(empty, 0.1f).ok());
  const ModelState after = *backend->SaveState();
  EXPECT_EQ(after.optimizer_steps, 2);
  testing::ExpectBitwiseEqual(after, before);
  ASSERT_FALSE(comm.first_gradient.empty());
  EXPECT_EQ(comm.first_gradient, std::vector<float>(comm.first_gradient.size(), 0.0f));
}

}  // namespace
}  // namespace sluice
