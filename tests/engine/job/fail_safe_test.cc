// A run either does what was asked or fails with one clear error: resume continues the same run
// or refuses, divergence and corrupt data past a limit are errors, nothing is silently skipped,
// and outputs are checked before the first step. Small synthetic shard datasets in a temp dir.
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "engine/checkpoint.h"
#include "engine/job/resume.h"
#include "engine/job/train_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// 8x8 u8 samples; class c lights up row c (learnable).
RecordArrays MakeRecords(uint64_t count, uint64_t seed) {
  RecordArrays r;
  r.spec = {SampleDType::kU8, LabelDType::kU8, 8, 8, 1};
  r.count = count;
  r.samples.resize(count * 64);
  r.labels.resize(count);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % 4);
    r.labels[i] = static_cast<char>(label);
    for (int p = 0; p < 64; ++p) {
      r.samples[i * 64 + p] = static_cast<char>(p / 8 == label ? 128 + rng() % 128 : rng() % 40);
    }
  }
  return r;
}

class FailSafeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_fail_safe_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Write("data", "train", 1000, 1);
    Write("data", "test", 200, 2);
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }

  // 100 records per frame, 500 per shard.
  void Write(const std::string& name, const std::string& split, uint64_t count, uint64_t seed) {
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 500;
    options.sharding.records_per_frame = 100;
    ASSERT_TRUE(
        WriteDataset(Env::Default(), JoinPath(dir_, name), split, MakeRecords(count, seed), options)
            .ok());
  }
  // The path of shard `index` of `split` in dataset `name` (file names come from the manifest:
  // they carry the shard's checksum, docs/formats/shard.md).
  std::string ShardPath(const std::string& name, const std::string& split, size_t index) const {
    auto ds = Dataset::Open(Env::Default(), JoinPath(dir_, name), split);
    EXPECT_TRUE(ds.ok()) << ds.status();
    if (!ds.ok() || index >= (*ds)->manifest().shards.size()) return "";
    return JoinPath(JoinPath(dir_, name), (*ds)->manifest().shards[index].file);
  }
  // Flips a byte inside frame 0 of shard `index` of `split` in dataset `name`.
  void CorruptFrame0(const std::string& name, const std::string& split, size_t index) {
    const std::string path = ShardPath(name, split, index);
    auto bytes = ReadFileToString(Env::Default(), path);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    std::string damaged = *bytes;
    damaged[80] ^= 0x40;  // past the 64-byte header: inside frame 0's stored bytes
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, damaged).ok());
  }

  TrainJobOptions Job() const {
    TrainJobOptions o;
    o.data = JoinPath(dir_, "data");
    o.backend.device.platform = device::Platform::kCpu;
    o.epochs = 2;
    o.model.layers = {64, 16, 4};
    o.pipeline.order.batch_size = 32;
    o.pipeline.order.shuffle = false;
    o.pipeline.resources.threads = 2;
    o.checkpoint_dir = JoinPath(dir_, "ckpt");
    return o;
  }
  std::string Checkpoint() const { return CheckpointPath(JoinPath(dir_, "ckpt")); }

  std::string dir_;
};

// Finding 1: a checkpoint at batch 32 resumed with --batch-size 40 (and another lr, shuffle
// and dataset) used to continue with the old step counter and exit 0.
TEST_F(FailSafeTest, ResumeWithChangedBatchSizeDataLrShuffleIsRefusedListingEachField) {
  TrainJobOptions first = Job();
  first.stop_after_steps = 10;
  first.checkpoint_every = 10;
  ASSERT_TRUE(RunTrainJob(Env::Default(), first).ok());
  Write("other", "train", 1000, 9);

  TrainJobOptions changed = Job();
  changed.resume = "auto";
  changed.data = JoinPath(dir_, "other");
  changed.pipeline.order.batch_size = 40;
  changed.optimizer.lr = 0.05f;
  changed.pipeline.order.shuffle = true;
  auto r = RunTrainJob(Env::Default(), changed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(r.status().message());
  EXPECT_THAT(m, HasSubstr(Checkpoint()));
  EXPECT_THAT(m, HasSubstr("batch_size: 32 in the checkpoint, 40 now"));
  EXPECT_THAT(m, HasSubstr("lr: 0.00999999978 in the checkpoint, 0.0500000007 now"));
  EXPECT_THAT(m, HasSubstr("shuffle: 0 in the checkpoint, 1 now"));
  EXPECT_THAT(m, HasSubstr("data.manifest_xxh3: "));
  EXPECT_THAT(m, HasSubstr("epoch 1 step 10 (320 samples into the epoch, 320 in total"));
}

// Finding 1: a different optimizer or model gets a readable message, not LoadState internals.
TEST_F(FailSafeTest, ResumeWithOtherOptimizerOrModelIsRefusedReadably) {
  TrainJobOptions first = Job();
  first.stop_after_steps = 5;
  first.checkpoint_every = 5;
  ASSERT_TRUE(RunTrainJob(Env::Default(), first).ok());
  TrainJobOptions changed = Job();
  changed.resume = "auto";
  changed.optimizer.kind = OptimizerKind::kAdamW;
  changed.model.layers = {64, 8, 4};
  auto r = RunTrainJob(Env::Default(), changed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("optimizer: sgd in the checkpoint, adamw now"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("model.layers: 64,16,4 in the checkpoint, 64,8,4 now"));
}

// Finding 1: more epochs, other threads: the same run, continued.
TEST_F(FailSafeTest, ResumeWithMoreEpochsIsAllowedAndContinues) {
  TrainJobOptions first = Job();
  first.epochs = 1;
  auto a = RunTrainJob(Env::Default(), first);
  ASSERT_TRUE(a.ok()) << a.status();
  TrainJobOptions more = Job();
  more.epochs = 3;
  more.resume = "auto";
  more.pipeline.resources.threads = 1;
  auto b = RunTrainJob(Env::Default(), more);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->resumed);
  EXPECT_EQ(b->resumed_epoch, 1u);
  EXPECT_EQ(b->resumed_samples, 1000u);
  EXPECT_EQ(b->train.samples, 2000);
  EXPECT_EQ(b->train.optimizer_steps, 3 * 32);
  auto c = ReadCheckpoint(Env::Default(), Checkpoint());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->samples_total, 3000u);
}

// Finding 1: --resume=auto with checkpoint.sluice a broken (or looping) symlink started afresh.
TEST_F(FailSafeTest, ResumeAutoWithDanglingOrLoopingCheckpointSymlinkIsAnError) {
  ASSERT_TRUE(Env::Default()->CreateDirs(JoinPath(dir_, "ckpt")).ok());
  ASSERT_EQ(::symlink(JoinPath(dir_, "gone.sluice").c_str(), Checkpoint().c_str()), 0);
  TrainJobOptions o = Job();
  o.resume = "auto";
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr(Checkpoint()));
  EXPECT_THAT(r.status().message(), HasSubstr("symlink"));
  ASSERT_EQ(::unlink(Checkpoint().c_str()), 0);
  ASSERT_EQ(::symlink(Checkpoint().c_str(), Checkpoint().c_str()), 0);  // loops on itself
  r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("symlink"));
}

// Finding 2: --lr=1e30 trained to NaN, overwrote the good checkpoint and exported NaN weights.
TEST_F(FailSafeTest, DivergingLrFailsNamingStepAndEpochKeepsCheckpointAndWritesNoExport) {
  ASSERT_TRUE(RunTrainJob(Env::Default(), Job()).ok());
  auto good = ReadFileToString(Env::Default(), Checkpoint());
  ASSERT_TRUE(good.ok());
  TrainJobOptions o = Job();
  o.optimizer.lr = 1e30f;
  o.checkpoint_every = 5;
  o.export_safetensors = JoinPath(dir_, "w.safetensors");
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(r.status().message(), HasSubstr("diverged"));
  EXPECT_THAT(r.status().message(), HasSubstr("epoch 1"));
  EXPECT_THAT(r.status().message(), HasSubstr("step 5"));
  auto after = ReadFileToString(Env::Default(), Checkpoint());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(*after == *good) << "the good checkpoint was overwritten";
  EXPECT_FALSE(Env::Default()->FileExists(o.export_safetensors));
}

// Finding 3: with every train frame corrupt, skip trained 0 samples and exited 0.
TEST_F(FailSafeTest, AllCorruptTrainSplitFails) {
  for (size_t shard : {0, 1}) {
    // Every frame of the shard: rewrite with one frame per shard is simpler, so corrupt each.
    const std::string path = ShardPath("data", "train", shard);
    auto bytes = ReadFileToString(Env::Default(), path);
    ASSERT_TRUE(bytes.ok());
    std::string damaged = *bytes;
    // The frames fill the file between the header and the index; one flip each 512 bytes hits
    // every frame (each is far larger than that).
    for (size_t at = 80; at + 1024 < damaged.size(); at += 512) damaged[at] ^= 0x40;
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, damaged).ok());
  }
  TrainJobOptions o = Job();
  o.pipeline.on_corrupt = OnCorrupt::kSkip;
  o.max_corrupt_fraction = 1.0;  // only the zero-sample rule is left
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("0 samples"));
  EXPECT_FALSE(Env::Default()->FileExists(Checkpoint()));
  o.max_corrupt_fraction = 0.01;
  r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("skipped as corrupt"));
}

// Finding 3: one corrupt frame of ten is 10% of the records; the limit decides, and below it
// the skips of both splits are reported.
TEST_F(FailSafeTest, CorruptFractionAboveTheLimitFailsBelowItPassesWithTheSkipsReported) {
  CorruptFrame0("data", "train", 1);
  CorruptFrame0("data", "test", 0);
  TrainJobOptions o = Job();
  o.pipeline.on_corrupt = OnCorrupt::kSkip;
  o.max_corrupt_fraction = 0.05;
  o.epochs = 1;  // (with more, the pipeline has read ahead into the next epoch at the check)
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("100 of 1000 records of the train split"));
  EXPECT_THAT(r.status().message(), HasSubstr("--max-corrupt-fraction=0.05"));
  EXPECT_THAT(r.status().message(), HasSubstr("train-00001-"));
  EXPECT_FALSE(Env::Default()->FileExists(Checkpoint()));

  o.max_corrupt_fraction = 0.6;  // the test split loses 100 of 200
  o.epochs = 2;
  r = RunTrainJob(Env::Default(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->run.pipeline.skipped_records, 200u);  // 100 per epoch read
  EXPECT_EQ(r->run.test_skipped_frames, 2u);         // one per evaluation
  EXPECT_EQ(r->run.test_skipped_records, 200u);
  const BottleneckReport report = AnalyzeRun(r->run, nullptr, 2);
  EXPECT_THAT(report.ToText(),
              HasSubstr("2 corrupt frames of the test split skipped (200 records)"));
}

// Finding 4: --test-data pointing at a dataset without a test split evaluated on its train split.
TEST_F(FailSafeTest, TestDataWithoutATestSplitFails) {
  Write("trainonly", "train", 300, 3);
  TrainJobOptions o = Job();
  o.test_data = JoinPath(dir_, "trainonly");
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no test split"));
  EXPECT_THAT(r.status().message(), HasSubstr(o.test_data));
}

// Finding 4: a dataset without a test split skipped evaluation without a word.
TEST_F(FailSafeTest, NoTestSplitIsReportedAsNothingEvaluated) {
  Write("trainonly", "train", 300, 3);
  TrainJobOptions o = Job();
  o.data = JoinPath(dir_, "trainonly");
  o.epochs = 1;
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->not_evaluated, HasSubstr("no test split"));
  EXPECT_THAT(AnalyzeRun(r->run, nullptr, 2).ToText(), HasSubstr("nothing was evaluated"));
}

// Finding 4: --drop-last with a batch larger than the dataset ran 0 steps and exited 0.
TEST_F(FailSafeTest, DropLastWithBatchLargerThanTheDatasetFails) {
  TrainJobOptions o = Job();
  o.pipeline.order.drop_last = true;
  o.pipeline.order.batch_size = 1001;
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // The batch-against-the-split check (docs/limits.md) refuses it before the drop-last one.
  EXPECT_THAT(r.status().message(), HasSubstr("--batch-size 1001 is larger than"));
  EXPECT_FALSE(Env::Default()->FileExists(Checkpoint()));
}

// Finding 4: an unwritable --export-safetensors failed only after training.
TEST_F(FailSafeTest, UnwritableExportFailsBeforeAnyTrainingStep) {
  TrainJobOptions o = Job();
  o.export_safetensors = JoinPath(dir_, "no/such/dir/w.safetensors");
  int steps = 0;
  o.progress_every_steps = 1;
  o.on_progress = [&steps](const TrainProgress&) { ++steps; };
  auto r = RunTrainJob(Env::Default(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--export-safetensors"));
  EXPECT_THAT(r.status().message(), HasSubstr(o.export_safetensors));
  EXPECT_EQ(steps, 0);
  EXPECT_FALSE(Env::Default()->FileExists(Checkpoint()));
}

}  // namespace
}  // namespace sluice
