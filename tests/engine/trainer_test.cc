#include "engine/trainer.h"

#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/testing/mem_env.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

struct Run {
  ModelState state;
  TrainResult result;
};

std::unique_ptr<Backend> NewBackend(const ModelState& state, const OptimizerConfig& opt) {
  BackendOptions options;
  options.max_batch = 32;
  auto backend = CreateCpuBackend(state, opt, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

InMemoryBatchSource MakeSource(const testing::Dataset& d, int features) {
  return InMemoryBatchSource(d.images, d.labels, features, 32, /*drop_last=*/false);
}

void ExpectBitwiseEqual(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  ASSERT_EQ(a.opt_state.size(), b.opt_state.size());
  EXPECT_EQ(a.optimizer_steps, b.optimizer_steps);
  for (size_t p = 0; p < a.params.size(); ++p) {
    ASSERT_EQ(0, std::memcmp(a.params[p].values.data(), b.params[p].values.data(),
                             4 * a.params[p].values.size()))
        << a.params[p].name;
  }
  for (size_t p = 0; p < a.opt_state.size(); ++p) {
    ASSERT_EQ(0, std::memcmp(a.opt_state[p].values.data(), b.opt_state[p].values.data(),
                             4 * a.opt_state[p].values.size()))
        << a.opt_state[p].name;
  }
}

class ResumeTest : public ::testing::TestWithParam<int> {};

// 1000 samples, batch 32: 32 batches per epoch (the last of 8). Interrupt at step k (in the
// middle of epoch 1 or at an epoch boundary), resume from the checkpoint in a new backend, and
// compare with an uninterrupted run, bit for bit, for SGD+momentum and AdamW with a schedule.
TEST_P(ResumeTest, InterruptedAndResumedRunEndsWithBitwiseSameWeights) {
  const int interrupt_after = GetParam();
  const auto data = testing::MakeDataset(1000, 784, 10, 0.5, 17);
  OptimizerConfig momentum, adamw;
  momentum.momentum = 0.9f;
  momentum.schedule = LrSchedule::kStep;
  momentum.step_size = 20;
  adamw.kind = OptimizerKind::kAdamW;
  adamw.lr = 0.001f;
  adamw.schedule = LrSchedule::kCosine;
  adamw.warmup_steps = 10;
  adamw.total_steps = 96;
  for (const OptimizerConfig& opt : {momentum, adamw}) {
    const ModelState init = InitModelState(ModelConfig{}, opt, 77);
    TrainerOptions options;
    options.epochs = 3;
    options.optimizer = opt;
    options.seed = 77;
    auto env = NewMemEnv();
    options.env = env.get();

    // Uninterrupted.
    auto full_backend = NewBackend(init, opt);
    auto full_source = MakeSource(data, 784);
    Trainer full(full_backend.get(), &full_source, nullptr, options);
    auto full_result = full.Run();
    ASSERT_TRUE(full_result.ok()) << full_result.status();
    EXPECT_EQ(full_result->optimizer_steps, 96);

    // Interrupted after `interrupt_after` steps, checkpointing every step.
    options.checkpoint_path = "/run/ck.ckpt";
    options.checkpoint_every_steps = 1;
    options.stop_after_steps = interrupt_after;
    auto first_backend = NewBackend(init, opt);
    auto first_source = MakeSource(data, 784);
    auto first = Trainer(first_backend.get(), &first_source, nullptr, options).Run();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE(first->stopped_early);
    // Perturb the first backend afterwards: the resumed run must not depend on it.
    first_backend.reset();

    auto checkpoint = ReadCheckpoint(env.get(), "/run/ck.ckpt");
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ(checkpoint->state.optimizer_steps, interrupt_after);
    EXPECT_EQ(checkpoint->epoch * 32 + checkpoint->step_in_epoch,
              static_cast<uint64_t>(interrupt_after));
    // A fresh backend from a different init: everything must come from the checkpoint.
    auto resumed_backend = NewBackend(InitModelState(ModelConfig{}, opt, 999), opt);
    auto resumed_source = MakeSource(data, 784);
    options.stop_after_steps = -1;
    options.checkpoint_every_steps = 0;
    Trainer resumed(resumed_backend.get(), &resumed_source, nullptr, options);
    ASSERT_TRUE(resumed.Resume(*checkpoint).ok());
    auto resumed_result = resumed.Run();
    ASSERT_TRUE(resumed_result.ok()) << resumed_result.status();
    EXPECT_EQ(resumed_result->optimizer_steps, 96);
    ExpectBitwiseEqual(*resumed_backend->SaveState(), *full_backend->SaveState());
    // The final checkpoint holds the final weights and points past the last epoch.
    auto final_checkpoint = ReadCheckpoint(env.get(), "/run/ck.ckpt");
    ASSERT_TRUE(final_checkpoint.ok());
    EXPECT_EQ(final_checkpoint->epoch, 3u);
    EXPECT_EQ(final_checkpoint->step_in_epoch, 0u);
    ExpectBitwiseEqual(final_checkpoint->state, *full_backend->SaveState());
  }
}

INSTANTIATE_TEST_SUITE_P(InterruptSteps, ResumeTest, ::testing::Values(1, 32, 45, 95));

TEST(TrainerTest, ReportsProgressEpochsAndTestAccuracy) {
  const auto train = testing::MakeDataset(1024, 100, 10, 0, 3, /*separable=*/true);
  const auto test = testing::MakeDataset(300, 100, 10, 0, 4, /*separable=*/true);
  ModelConfig model;
  model.layers = {100, 32, 10};
  OptimizerConfig opt;
  opt.lr = 0.1f;
  BackendOptions backend_options;
  backend_options.max_batch = 32;
  auto backend = *CreateCpuBackend(InitModelState(model, opt, 1), opt, backend_options);
  InMemoryBatchSource train_source(train.images, train.labels, 100, 32, false);
  InMemoryBatchSource test_source(test.images, test.labels, 100, 32, false);
  TrainerOptions options;
  options.epochs = 2;
  options.optimizer = opt;
  options.progress_every_steps = 8;
  std::vector<TrainProgress> progress;
  std::vector<EpochSummary> epochs;
  options.on_progress = [&](const TrainProgress& p) { progress.push_back(p); };
  options.on_epoch_end = [&](const EpochSummary& e) { epochs.push_back(e); };
  Trainer trainer(backend.get(), &train_source, &test_source, options);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->samples, 2048);
  EXPECT_EQ(progress.size(), 8u);  // 64 steps / 8
  EXPECT_EQ(progress[3].step_in_epoch, 32u);
  EXPECT_EQ(progress[4].epoch, 1u);
  EXPECT_GT(progress[0].samples_per_second, 0);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].train_samples, 1024);
  ASSERT_TRUE(epochs[1].test.has_value());
  EXPECT_EQ(epochs[1].test->samples, 300);
  EXPECT_GT(epochs[1].test->accuracy(), 0.95);
  EXPECT_LT(epochs[1].train_loss, epochs[0].train_loss);
}

// A source that notes, for each batch handed out and each evaluation, whether the trainer had
// said it was inside its span (BatchSource::NoteSpan).
class SpanNotingSource : public InMemoryBatchSource {
 public:
  using InMemoryBatchSource::InMemoryBatchSource;
  absl::StatusOr<std::optional<BatchView>> Next() override {
    if (!in_span_) ++batches_outside_;
    return InMemoryBatchSource::Next();
  }
  void NoteSpan(bool in_span) override {
    in_span_ = in_span;
    notes_ += in_span ? "+" : "-";
  }
  bool in_span_ = true;
  int batches_outside_ = 0;
  std::string notes_;
};

// The trainer is inside the span while it trains an epoch (the report's training time) and
// outside it from the epoch's end through its evaluation, and while it writes a checkpoint.
TEST(TrainerTest, NotesItsSpanToTheSource) {
  const auto train = testing::MakeDataset(256, 100, 10, 0, 3, /*separable=*/true);
  const auto test = testing::MakeDataset(64, 100, 10, 0, 4, /*separable=*/true);
  ModelConfig model;
  model.layers = {100, 16, 10};
  OptimizerConfig opt;
  auto backend = NewBackend(InitModelState(model, opt, 1), opt);
  SpanNotingSource train_source(train.images, train.labels, 100, 32, false);
  int evaluated_outside = 0;
  struct TestSource : InMemoryBatchSource {
    using InMemoryBatchSource::InMemoryBatchSource;
    absl::StatusOr<std::optional<BatchView>> Next() override {
      if (!train->in_span_) ++*outside;
      return InMemoryBatchSource::Next();
    }
    const SpanNotingSource* train = nullptr;
    int* outside = nullptr;
  } test_source(test.images, test.labels, 100, 32, false);
  test_source.train = &train_source;
  test_source.outside = &evaluated_outside;
  auto env = NewMemEnv();
  TrainerOptions options;
  options.epochs = 2;
  options.optimizer = opt;
  options.env = env.get();
  options.checkpoint_path = "/run/span.ckpt";
  options.checkpoint_every_steps = 4;  // 8 steps per epoch: one mid-epoch checkpoint each
  Trainer trainer(backend.get(), &train_source, &test_source, options);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(train_source.batches_outside_, 0);
  EXPECT_EQ(evaluated_outside, 2 * 3);  // 64 test samples: 2 batches and the end, per epoch
  // Per epoch: in, out and back around each of its 2 checkpoints (steps 4 and 8), out at its end.
  EXPECT_EQ(train_source.notes_, "+-+-+-+-+-+-");
}

// A stop request (SIGINT in sluice-train) ends Run() after the step in progress, with a
// checkpoint at that position that a resumed Trainer continues from.
TEST(TrainerTest, StopRequestedEndsAfterTheStepWithCheckpointThatResumes) {
  const auto train = testing::MakeDataset(1024, 100, 10, 0, 3, /*separable=*/true);
  ModelConfig model;
  model.layers = {100, 32, 10};
  OptimizerConfig opt;
  opt.lr = 0.1f;
  BackendOptions backend_options;
  backend_options.max_batch = 32;
  char tmpl[] = "/tmp/sluice_trainer_stop_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::atomic<bool> stop{false};
  TrainerOptions options;
  options.epochs = 2;
  options.optimizer = opt;
  options.checkpoint_path = dir + "/checkpoint.sluice";
  options.stop_requested = &stop;
  options.progress_every_steps = 1;
  options.on_progress = [&](const TrainProgress& p) {
    if (p.optimizer_steps == 5) stop = true;
  };
  auto backend = *CreateCpuBackend(InitModelState(model, opt, 1), opt, backend_options);
  InMemoryBatchSource source(train.images, train.labels, 100, 32, false);
  Trainer trainer(backend.get(), &source, nullptr, options);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->interrupted);
  EXPECT_EQ(result->optimizer_steps, 5);
  EXPECT_EQ(result->stopped_epoch, 0u);
  EXPECT_EQ(result->stopped_step, 5u);
  auto checkpoint = ReadCheckpoint(Env::Default(), options.checkpoint_path);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->step_in_epoch, 5u);
  EXPECT_EQ(checkpoint->state.optimizer_steps, 5);

  stop = false;
  auto backend2 = *CreateCpuBackend(InitModelState(model, opt, 1), opt, backend_options);
  InMemoryBatchSource source2(train.images, train.labels, 100, 32, false);
  options.on_progress = nullptr;
  Trainer resumed(backend2.get(), &source2, nullptr, options);
  ASSERT_TRUE(resumed.Resume(*checkpoint).ok());
  auto rest = resumed.Run();
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_FALSE(rest->interrupted);
  EXPECT_EQ(rest->optimizer_steps, 64);
  std::system(("rm -rf " + dir).c_str());
}

TEST(InMemoryBatchSourceTest, DropLastAndSeekSelectTheRightSamples) {
  testing::Dataset d = testing::MakeDataset(70, 4, 3, 0.5, 1);
  InMemoryBatchSource keep(d.images, d.labels, 4, 32, false), drop(d.images, d.labels, 4, 32, true);
  EXPECT_EQ(keep.batches_per_epoch(), 3u);
  EXPECT_EQ(drop.batches_per_epoch(), 2u);
  ASSERT_TRUE(keep.Seek(5, 2).ok());
  auto last = keep.Next();
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->size, 6u);
  EXPECT_EQ(std::vector<int32_t>((*last)->labels, (*last)->labels + 6),
            std::vector<int32_t>(d.labels.begin() + 64, d.labels.end()));
  EXPECT_EQ((*last)->epoch, 5u);
  EXPECT_EQ((*last)->step, 2u);
  EXPECT_FALSE(keep.Next()->has_value());
  ASSERT_TRUE(drop.Seek(0, 2).ok());
  EXPECT_FALSE(drop.Next()->has_value());
}

}  // namespace
}  // namespace sluice
