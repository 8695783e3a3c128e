// Two trainings with one checkpoint directory: the job holds the directory's lock for its whole
// life (docs/formats/lock.md), so a second job fails at once naming the first, instead of
// racing it for checkpoint.sluice or resuming from its checkpoint.
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/file_lock.h"
#include "common/testing/mem_env.h"
#include "engine/job/resume.h"
#include "engine/job/train_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/dataset_writer.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TrainJobOptions SmallJob() {
  TrainJobOptions o;
  o.data = "/data/train.manifest.json";
  o.backend.device.platform = device::Platform::kCpu;
  o.epochs = 1;
  o.evaluate = false;
  o.checkpoint_dir = "/ckpt";
  o.pipeline.order.batch_size = 32;
  o.pipeline.resources.threads = 1;
  return o;
}

TEST(CheckpointLockTest, SecondJobOnOneCheckpointDirFailsAtOnceNamingTheFirst) {
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteDataset(env.get(), "/data", "train",
                           testing::MakeRecords(testing::U8Spec(28, 28), 256),
                           testing::Options(128, 32))
                  .ok());
  absl::Status second;
  bool called = false;
  TrainJobOptions first = SmallJob();
  first.on_epoch_end = [&](const EpochSummary&) {
    if (called) return;
    called = true;
    TrainJobOptions other = SmallJob();
    other.resume = "auto";
    second = RunTrainJob(env.get(), other).status();  // while the first job runs
  };
  auto result = RunTrainJob(env.get(), first);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(called);
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable) << second;
  EXPECT_THAT(second.message(),
              HasSubstr("/ckpt/.sluice.lock: cannot start sluice-train checkpoints: the directory "
                        "is locked by pid " +
                        std::to_string(::getpid()) + " on host "));
  // Released when the first job returns: the next job resumes from its checkpoint.
  EXPECT_FALSE(env->FileExists(JoinPath("/ckpt", FileLock::kFileName)));
  TrainJobOptions later = SmallJob();
  later.resume = "auto";
  later.epochs = 2;
  auto resumed = RunTrainJob(env.get(), later);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(resumed->resumed);
}

TEST(CheckpointLockTest, JobRefusedWhileAnotherProcessHoldsTheCheckpointDir) {
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteDataset(env.get(), "/data", "train",
                           testing::MakeRecords(testing::U8Spec(28, 28), 64),
                           testing::Options(64, 32))
                  .ok());
  auto holder = FileLock::Acquire(env.get(), "/ckpt", "another training");
  ASSERT_TRUE(holder.ok()) << holder.status();
  auto job = RunTrainJob(env.get(), SmallJob());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnavailable) << job.status();
  EXPECT_THAT(job.status().message(), HasSubstr("(another training)"));
  EXPECT_FALSE(env->FileExists(CheckpointPath("/ckpt")));
}

}  // namespace
}  // namespace sluice
