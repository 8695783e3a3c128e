#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oneapi/tbb/task_arena.h"
#include "report/stages.h"
#include "tests/pipeline/test_util.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

PipelineOptions SmallOptions() {
  PipelineOptions o;
  o.order.batch_size = 7;
  o.order.seed = 42;
  o.order.shuffle_window_frames = 3;
  o.resources.threads = 2;
  o.resources.pool_size = 3;
  o.resources.read_ahead_frames = 2;
  return o;
}

std::vector<uint32_t> AllIds(const std::vector<Batch>& batches, uint64_t epoch) {
  std::vector<uint32_t> ids;
  for (const Batch& b : batches) {
    if (b.epoch == epoch) ids.insert(ids.end(), b.ids.begin(), b.ids.end());
  }
  return ids;
}

struct EpochCase {
  bool shuffle;
  bool drop_last;
  uint32_t window;
};

class EveryRecordOnce : public ::testing::TestWithParam<EpochCase> {};

TEST_P(EveryRecordOnce, PerEpochInStepOrderWithLabels) {
  TestDataset data(250, 100, 16);  // 3 shards (100, 100, 50), short frames at each shard end
  PipelineOptions o = SmallOptions();
  o.order.shuffle = GetParam().shuffle;
  o.order.drop_last = GetParam().drop_last;
  o.order.shuffle_window_frames = GetParam().window;
  o.span.epochs = 2;
  auto batches = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(batches.ok()) << batches.status();
  const uint64_t steps = o.order.drop_last ? 250 / 7 : (250 + 6) / 7;
  ASSERT_EQ(batches->size(), 2 * steps);
  for (uint64_t e = 0; e < 2; ++e) {
    std::vector<uint32_t> ids = AllIds(*batches, e);
    std::set<uint32_t> unique(ids.begin(), ids.end());
    EXPECT_EQ(unique.size(), ids.size()) << "a record was delivered twice in epoch " << e;
    EXPECT_EQ(ids.size(), o.order.drop_last ? steps * 7 : 250u);
    if (!o.order.shuffle) {
      for (uint32_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], i);
    }
  }
  for (size_t i = 0; i < batches->size(); ++i) {
    const Batch& b = (*batches)[i];
    EXPECT_EQ(b.epoch, i / steps);
    EXPECT_EQ(b.step, i % steps);
    const bool last = b.step + 1 == steps;
    EXPECT_EQ(b.ids.size(), last && !o.order.drop_last ? 250 - (steps - 1) * 7 : 7u);
    for (size_t k = 0; k < b.ids.size(); ++k)
      EXPECT_EQ(b.labels[k], static_cast<int32_t>(b.ids[k] % 10));
  }
  if (o.order.shuffle) {
    EXPECT_NE(AllIds(*batches, 0), AllIds(*batches, 1)) << "epochs must be shuffled differently";
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, EveryRecordOnce,
                         ::testing::Values(EpochCase{false, false, 3}, EpochCase{false, true, 3},
                                           EpochCase{true, false, 3}, EpochCase{true, true, 3},
                                           EpochCase{true, false, 0}, EpochCase{true, false, 1}));

TEST(Pipeline, SameBatchesWhateverThreadsAndPoolSize) {
  TestDataset data(300, 128, 16);
  PipelineOptions o = SmallOptions();
  o.resources.threads = 1;
  o.resources.pool_size = 1;
  o.span.epochs = 2;
  auto reference = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (int threads : {1, 2, 3}) {
    for (uint32_t pool : {1u, 2u, 5u}) {
      for (int stage_threads : {0, 1}) {
        o.resources.threads = threads;
        o.resources.pool_size = pool;
        o.resources.decompress_threads = stage_threads;
        o.resources.preprocess_threads = stage_threads;
        auto got = RunAll(data.dataset.get(), o);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, *reference) << "threads " << threads << " pool " << pool;
      }
    }
  }
  // And when the caller runs inside a small TBB arena of its own.
  oneapi::tbb::task_arena caller_arena(1);
  caller_arena.execute([&] {
    o.resources.threads = 2;
    auto got = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *reference);
  });
}

TEST(Pipeline, FormatsCarryTheSameSamples) {
  TestDataset data(100, 100, 16);
  PipelineOptions o = SmallOptions();
  o.format.h2d_format = H2DFormat::kU8;
  auto u8 = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(u8.ok()) << u8.status();
  for (H2DFormat f : {H2DFormat::kF16, H2DFormat::kF32}) {
    o.format.h2d_format = f;
    auto got = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *u8) << H2DFormatName(f);
  }
}

TEST(Pipeline, StartAtStepIsTheTailAndSkipsFramesItDoesNotNeed) {
  TestDataset data(256, 256, 16);  // one shard, 16 frames
  PipelineOptions o = SmallOptions();
  o.order.batch_size = 16;
  o.order.shuffle_window_frames = 2;  // 32-record windows
  o.span.epochs = 2;
  auto full = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(full.ok()) << full.status();
  const ShardReader* reader = *data.dataset->shard(0);
  for (uint64_t k : {0u, 1u, 5u, 8u, 15u, 16u}) {
    data.env->Clear();
    o.span.start_epoch = 0;
    o.span.start_step = k;
    auto tail = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(tail.ok()) << tail.status();
    ASSERT_EQ(tail->size(), full->size() - k);
    EXPECT_TRUE(std::equal(tail->begin(), tail->end(), full->begin() + k)) << "start " << k;
    // Epoch 0's skipped steps cover whole windows (2 frames = 2 steps): their frames are read
    // once (for epoch 1), not twice.
    int frames_read_twice = 0;
    for (const FrameInfo& fi : reader->frames()) {
      frames_read_twice += data.env->ReadsAt(data.manifest.shards[0].file, fi.offset) == 2;
    }
    EXPECT_EQ(frames_read_twice, 16 - static_cast<int>(k / 2 * 2)) << "start " << k;
  }
  // Starting in a later epoch equals that epoch of the full run.
  o.span.start_epoch = 1;
  o.span.start_step = 3;
  o.span.epochs = 1;
  auto later = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_EQ(later->size(), 16u - 3);
  EXPECT_TRUE(std::equal(later->begin(), later->end(), full->begin() + 16 + 3));
}

TEST(Pipeline, StartStepPastTheEpochIsInvalid) {
  TestDataset data(64, 64, 16);
  PipelineOptions o = SmallOptions();
  o.order.batch_size = 16;
  o.span.start_step = 5;
  EXPECT_EQ(Pipeline::Create(data.dataset.get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.span.start_step = 4;  // exactly the end: an empty run
  auto batches = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_TRUE(batches->empty());
}

// StepsPerEpoch is what callers (the Python loader, the job's LR schedule) count before a
// pipeline exists: it must agree with the pipeline's own count.
TEST(Pipeline, StepsPerEpochAgreesWithThePipeline) {
  TestDataset data(23, 23, 5);
  for (const bool drop_last : {false, true}) {
    PipelineOptions o = SmallOptions();
    o.order.batch_size = 5;
    o.order.drop_last = drop_last;
    auto p = Pipeline::Create(data.dataset.get(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(StepsPerEpoch(23, o.order), drop_last ? 4u : 5u);
    EXPECT_EQ(StepsPerEpoch(23, o.order), (*p)->steps_per_epoch());
  }
  OrderSpec empty_batches;
  empty_batches.batch_size = 0;
  EXPECT_EQ(StepsPerEpoch(23, empty_batches), 0u);
}

TEST(Pipeline, SlowConsumerNeverHasMoreThanPoolSizeBuffersFilled) {
  TestDataset data(512, 512, 16);
  PipelineOptions o = SmallOptions();
  o.resources.pool_size = 2;
  o.order.batch_size = 8;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  BatchLease lease;
  uint64_t n = 0;
  while (*(*p)->Next(&lease)) {
    if (++n % 8 == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let it run ahead
  }
  const PipelineStats s = (*p)->Stats();
  EXPECT_EQ(n, 64u);
  EXPECT_LE(s[Stage::kPinnedWait].queue_high_water, 2u);
  EXPECT_LE(s[Stage::kRead].queue_high_water, s.frame_budget);
  EXPECT_LE(s[Stage::kDelivery].queue_high_water, 2u);
}

// sluice.Loader starts the next epoch's pipeline when this one has built every batch.
TEST(Pipeline, BuiltAllOnceEveryBatchIsQueuedNotWhileBuffersAreShort) {
  TestDataset data(64, 64, 16);
  PipelineOptions o = SmallOptions();
  o.order.batch_size = 8;  // 8 batches
  o.resources.pool_size = 2;
  auto small = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(small.ok()) << small.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE((*small)->built_all()) << "2 buffers cannot hold 8 batches";
  o.resources.pool_size = 8;
  auto whole = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int i = 0; i < 2000 && !(*whole)->built_all(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE((*whole)->built_all());
  BatchLease lease;
  uint64_t n = 0;
  while (*(*whole)->Next(&lease)) ++n;
  EXPECT_EQ(n, 8u);
}

// A built batch goes to the consumer at once, not after the other batches of its frame (a
// sequencer's deliver task used to wait until no assembly was queued: a pass's first batch
// came after its whole first frame).
TEST(Pipeline, ABatchIsDeliveredWhenBuiltNotAfterTheRestOfItsFrame) {
  TestDataset data(128, 128, 128);  // one frame of 16 batches
  PipelineOptions o = SmallOptions();
  o.order.batch_size = 8;
  o.order.shuffle = false;
  o.resources.pool_size = 16;
  o.diagnostics.inject_delay_us[static_cast<int>(Stage::kPreprocess)] = 40'000;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  BatchLease lease;
  ASSERT_TRUE(*(*p)->Next(&lease));
  // 2 threads, 40 ms a batch: the whole frame takes 320 ms, the first batch 40 ms.
  EXPECT_LE((*p)->Stats()[Stage::kPreprocess].items, 8u);
  (*p)->Cancel();
}

TEST(Pipeline, AskingForMoreThanPoolSizeLeasesFails) {
  TestDataset data(64, 64, 16);
  PipelineOptions o = SmallOptions();
  o.resources.pool_size = 2;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok());
  BatchLease a, b, c;
  ASSERT_TRUE(*(*p)->Next(&a));
  ASSERT_TRUE(*(*p)->Next(&b));
  EXPECT_EQ((*p)->Next(&c).status().code(), absl::StatusCode::kFailedPrecondition);
  a.Release();
  EXPECT_TRUE(*(*p)->Next(&c));
}

TEST(Pipeline, NextForInSlicesDeliversExactlyWhatNextDelivers) {
  TestDataset data(500, 200, 16);
  PipelineOptions o = SmallOptions();
  o.span.epochs = 2;
  auto expected = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok());
  std::vector<Batch> got;
  BatchLease lease;
  while (true) {
    // A 1 us slice times out often; every timeout must consume nothing.
    absl::StatusOr<bool> next = (*p)->NextFor(&lease, absl::Microseconds(1));
    if (absl::IsDeadlineExceeded(next.status())) continue;
    ASSERT_TRUE(next.ok()) << next.status();
    if (!*next) break;
    got.push_back(ToBatch(lease.view()));
  }
  EXPECT_EQ(got, *expected);
}

TEST(Pipeline, NextForWaitingSeesCancelFromAnotherThread) {
  TestDataset data(64, 64, 16);
  PipelineOptions o = SmallOptions();
  // Reading a frame takes 1 s: the first NextFor is still waiting when the cancel comes.
  o.diagnostics.inject_delay_us[static_cast<int>(Stage::kRead)] = 1'000'000;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok());
  std::thread canceller([&p] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*p)->Cancel();
  });
  BatchLease lease;
  EXPECT_EQ((*p)->NextFor(&lease, absl::Seconds(60)).status().code(), absl::StatusCode::kCancelled);
  canceller.join();
}

TEST(Pipeline, CancelMidEpochHangsNothingAndLeaksNothing) {
  TestDataset data(2000, 500, 16);
  for (int round = 0; round < 5; ++round) {
    PipelineOptions o = SmallOptions();
    o.span.epochs = 3;
    auto p = Pipeline::Create(data.dataset.get(), o);
    ASSERT_TRUE(p.ok());
    BatchLease kept, lease;
    ASSERT_TRUE(*(*p)->Next(&kept));
    for (int i = 0; i < round * 7; ++i) ASSERT_TRUE(*(*p)->Next(&lease));
    (*p)->Cancel();
    EXPECT_EQ((*p)->Next(&lease).status().code(), absl::StatusCode::kCancelled);
    p->reset();  // destroys the graph with work in flight and a lease outstanding
    EXPECT_EQ(ToBatch(kept.view()).ids.size(), 7u);  // still readable
    kept.Release();
  }
}

TEST(Pipeline, DestroyedBeforeAnyBatchIsTaken) {
  TestDataset data(2000, 500, 16);
  for (int round = 0; round < 5; ++round) {
    auto p = Pipeline::Create(data.dataset.get(), SmallOptions());
    ASSERT_TRUE(p.ok());
  }
}

TEST(Pipeline, CorruptFrameFailsWithDataLossNamingFileFrameAndOffset) {
  TestDataset data(200, 100, 16);
  data.CorruptFrame(1, 2);
  const uint64_t offset = (*data.dataset->shard(1))->frames()[2].offset;
  auto batches = RunAll(data.dataset.get(), SmallOptions());
  ASSERT_FALSE(batches.ok());
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(batches.status().message(), HasSubstr(data.manifest.shards[1].file));
  EXPECT_THAT(batches.status().message(), HasSubstr("frame 2"));
  EXPECT_THAT(batches.status().message(), HasSubstr(std::to_string(offset)));
}

TEST(Pipeline, CorruptFrameSkippedKeepsEveryOtherSampleInItsPlace) {
  TestDataset data(200, 100, 16);
  PipelineOptions o = SmallOptions();
  o.span.epochs = 2;
  auto clean = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(clean.ok());
  data.CorruptFrame(1, 2);  // records 100 + [32, 48)
  o.on_corrupt = OnCorrupt::kSkip;
  PipelineStats stats;
  auto got = RunAll(data.dataset.get(), o, &stats);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<Batch> expected;
  for (Batch b : *clean) {
    Batch kept{b.epoch, b.step, {}, {}};
    for (size_t i = 0; i < b.ids.size(); ++i) {
      if (b.ids[i] >= 132 && b.ids[i] < 148) continue;
      kept.ids.push_back(b.ids[i]);
      kept.labels.push_back(b.labels[i]);
    }
    if (!kept.ids.empty()) expected.push_back(kept);
  }
  EXPECT_EQ(*got, expected);
  EXPECT_EQ(stats.skipped_frames, 2u);  // once per epoch
  EXPECT_EQ(stats.skipped_records, 32u);
  ASSERT_EQ(stats.corrupt_frames.size(), 1u);
  EXPECT_THAT(stats.corrupt_frames[0], HasSubstr("frame 2"));
}

TEST(Pipeline, AllSkippedBatchIsNotDelivered) {
  TestDataset data(64, 64, 16);
  data.CorruptFrame(0, 1);  // records [16, 32): exactly batch 1 with shuffle off
  PipelineOptions o = SmallOptions();
  o.order.shuffle = false;
  o.order.batch_size = 16;
  o.on_corrupt = OnCorrupt::kSkip;
  PipelineStats stats;
  auto got = RunAll(data.dataset.get(), o, &stats);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[1].step, 2u);  // steps keep their numbers
  EXPECT_EQ(stats.empty_batches, 1u);
}

TEST(Pipeline, WhatIfModesDeliverTheSameBatches) {
  TestDataset data(300, 128, 16);
  PipelineOptions o = SmallOptions();
  auto reference = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(reference.ok());
  for (Stage w : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess, Stage::kH2D}) {
    o.diagnostics.what_if = w;
    PipelineStats stats;
    auto got = RunAll(data.dataset.get(), o, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *reference) << StageName(w);
    EXPECT_EQ(stats[Stage::kPreprocess].items, reference->size()) << StageName(w);
    // Stored-frame buffers are recycled in every mode that reads (what-if decompress too): the
    // pool never holds more than the frames in flight.
    uint64_t max_stored = 0, frames = 0;
    for (size_t i = 0; i < data.manifest.shards.size(); ++i) {
      for (const FrameInfo& fi : (*data.dataset->shard(i))->frames()) {
        max_stored = std::max<uint64_t>(max_stored, fi.stored_size);
        ++frames;
      }
    }
    ASSERT_GT(frames, stats.frame_budget + 1u);  // enough frames to tell recycling apart
    if (w == Stage::kRead) {
      EXPECT_EQ(stats.stored_buffer_bytes, 0u);  // served from memory
    } else {
      EXPECT_GT(stats.stored_buffer_bytes, 0u) << StageName(w);
      EXPECT_LE(stats.stored_buffer_bytes, (stats.frame_budget + 1) * max_stored) << StageName(w);
    }
  }
}

TEST(Pipeline, WhatIfReadServesFramesFromMemory) {
  TestDataset data(256, 256, 16);
  PipelineOptions o = SmallOptions();
  o.diagnostics.what_if = Stage::kRead;
  o.span.epochs = 3;
  ASSERT_TRUE(RunAll(data.dataset.get(), o).ok());
  // Each frame is read once, before the run, however many epochs run.
  for (const FrameInfo& fi : (*data.dataset->shard(0))->frames()) {
    EXPECT_EQ(data.env->ReadsAt(data.manifest.shards[0].file, fi.offset), 1);
  }
}

class InjectDelay : public ::testing::TestWithParam<Stage> {};

TEST_P(InjectDelay, ShowsUpInThatStagesBusyTime) {
  TestDataset data(128, 128, 16);
  PipelineOptions o = SmallOptions();
  auto reference = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(reference.ok());
  const Stage stage = GetParam();
  o.diagnostics.inject_delay_us[static_cast<int>(stage)] = 3000;
  PipelineStats stats;
  auto got = RunAll(data.dataset.get(), o, &stats);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, *reference);
  const StageStats& s = stats[stage];
  ASSERT_GT(s.items, 0u);
  EXPECT_GE(s.busy_ns, static_cast<int64_t>(s.items) * 3'000'000) << stats.ToString();
}

INSTANTIATE_TEST_SUITE_P(Stages, InjectDelay,
                         ::testing::Values(Stage::kRead, Stage::kDecompress, Stage::kPreprocess));

TEST(Pipeline, StatsCountWhatEachStageDid) {
  TestDataset data(250, 100, 16);  // 7+7+4 = 18 frames
  PipelineOptions o = SmallOptions();
  o.span.epochs = 2;
  o.diagnostics.trace_capacity = 10;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok());
  BatchLease lease;
  uint64_t n = 0;
  while (*(*p)->Next(&lease)) ++n;
  lease.Release();
  const PipelineStats s = (*p)->Stats();
  EXPECT_EQ(s[Stage::kRead].items, 36u);
  EXPECT_EQ(s.frames_read, 36u);
  EXPECT_EQ(s[Stage::kDecompress].items, 36u);
  EXPECT_EQ(s[Stage::kDecompress].samples, 500u);
  EXPECT_EQ(s[Stage::kPreprocess].items, n);
  EXPECT_EQ(s[Stage::kPreprocess].samples, 500u);
  EXPECT_EQ(s[Stage::kPreprocess].bytes, 500u * 16 * 4);
  EXPECT_EQ(s[Stage::kDelivery].items, n);
  EXPECT_EQ(s.batches_delivered, n);
  EXPECT_EQ(s.samples_delivered, 500u);
  for (const StageStats& st : s.stages) {
    if (st.items == 0) continue;
    EXPECT_GT(st.last_end_ns, 0) << StageName(st.stage);
    EXPECT_LE(st.first_start_ns, st.last_end_ns) << StageName(st.stage);
    EXPECT_GE(st.busy_ns, 0);
  }
  const std::vector<TraceSpan> trace = (*p)->Trace();
  EXPECT_EQ(trace.size(), 10u);
  EXPECT_GT(s.trace_dropped, 0u);
  for (const TraceSpan& t : trace) EXPECT_LE(t.start_ns, t.end_ns);
}

TEST(Pipeline, HostBatchesWithoutADevice) {
  TestDataset data(64, 64, 16);
  auto p = Pipeline::Create(data.dataset.get(), SmallOptions());
  ASSERT_TRUE(p.ok());
  BatchLease lease;
  ASSERT_TRUE(*(*p)->Next(&lease));
  if (!(*p)->uploads_to_device()) {
    EXPECT_FALSE(lease.view().on_device);
    EXPECT_EQ(lease.view().ready_event, nullptr);
    EXPECT_EQ(lease.view().sample.values(), 16u);
  }
}

TEST(Pipeline, BadOptionsAreInvalidArgument) {
  TestDataset data(64, 64, 16);
  PipelineOptions o = SmallOptions();
  o.order.batch_size = 0;
  EXPECT_EQ(Pipeline::Create(data.dataset.get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.format.normalization.std = {0.0f};
  EXPECT_EQ(Pipeline::Create(data.dataset.get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseOnCorrupt("maybe").ok());
  EXPECT_EQ(*ParseH2DFormat("f16"), H2DFormat::kF16);
}

TEST(Pipeline, PoolSizeZeroPicksEnoughBuffersForAutoPoolSamples) {
  TestDataset data(8192, 8192, 16);  // 1024 batches of 8 per epoch: a quarter is 256
  PipelineOptions o = SmallOptions();
  o.resources.pool_size = 0;
  o.order.batch_size = 8;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Stats().pool_buffers, 256u);  // 4096 / 8 = 512, capped at 256
  // An epoch of 64 batches: a quarter of them over several epochs, all of them over one.
  TestDataset small(512, 512, 16);
  o.span.epochs = 3;
  p = Pipeline::Create(small.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Stats().pool_buffers, 16u);
  o.span.epochs = 1;
  p = Pipeline::Create(small.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Stats().pool_buffers, 64u);
  o.order.batch_size = 4096;
  p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Stats().pool_buffers, 4u);  // at least 4
}

}  // namespace
}  // namespace sluice::testing
