// Busy is work, waiting is wait: with a consumer that holds the pipeline back, every stage's
// time goes to waiting on what follows it (wait-out), not to busy.
#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "report/stages.h"
#include "tests/pipeline/test_util.h"

namespace sluice::testing {
namespace {

struct Shares {
  double busy = 0, wait_output = 0;
};

// A stage's busy and wait-out, as shares of its threads over its own window.
Shares SharesOf(const StageStats& s) {
  const double capacity = static_cast<double>(s.concurrency) * (s.last_end_ns - s.first_start_ns);
  if (capacity <= 0) return {};
  return {s.busy_ns / capacity, s.wait_output_ns / capacity};
}

// One run with a consumer that sleeps `sleep_ms` after every batch.
PipelineStats BackpressuredRun(const Dataset* dataset, int sleep_ms) {
  PipelineOptions o;
  o.order.batch_size = 16;
  o.order.seed = 7;
  o.order.shuffle_window_frames = 2;
  o.resources.threads = 2;
  o.resources.pool_size = 2;
  o.resources.read_ahead_frames = 1;
  auto p = Pipeline::Create(dataset, o);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  BatchLease lease;
  while (*(*p)->Next(&lease)) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  lease.Release();
  return (*p)->Stats();
}

TEST(PipelineStageWaits, HeldBackStagesShowWaitOutNotBusy) {
  TestDataset data(2048, 2048, 16);  // 128 frames, far more than the frame budget
  // Timing on a shared machine: a stage's thread can lose its core mid-item, so the run is
  // retried, and the margins are wide (a held-back stage is busy a few % at most).
  std::string failures;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const PipelineStats s = BackpressuredRun(data.dataset.get(), 2);
    ASSERT_EQ(s.samples_delivered, 2048u);
    failures.clear();
    for (Stage st : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
      const Shares sh = SharesOf(s[st]);
      if (sh.busy > 0.25 || sh.wait_output < 0.5) {
        failures += std::string(StageName(st)) + " busy " + std::to_string(sh.busy) + " wait-out " +
                    std::to_string(sh.wait_output) + "; ";
      }
      EXPECT_LE(s[st].busy_ns + s[st].wait_output_ns + s[st].wait_input_ns,
                int64_t{s[st].concurrency} * (s[st].last_end_ns - s[st].first_start_ns) + 1)
          << StageName(st);
    }
    // The pool's blocked span is wall time: never more than the run.
    EXPECT_LE(s[Stage::kPinnedWait].wait_output_ns, s.snapshot_ns - s.start_ns);
    if (failures.empty()) break;
  }
  EXPECT_EQ(failures, "") << "a held-back stage counted its wait as busy";
}

// Item latency is each item's own time: the consumer holds every batch at least 2 ms, so
// delivery's median item (a batch held) is at least that, to within the histogram's 1/16.
TEST(PipelineStageWaits, ItemLatencyIsEachItemsTime) {
  TestDataset data(512, 512, 16);
  const PipelineStats s = BackpressuredRun(data.dataset.get(), 2);
  ASSERT_EQ(s.samples_delivered, 512u);
  const LatencySummary& d = s[Stage::kDelivery].latency;
  EXPECT_EQ(d.items, s[Stage::kDelivery].items);
  EXPECT_GE(d.p50_ns, 2'000'000 * 15 / 16);
  for (Stage st : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess, Stage::kDelivery}) {
    const StageStats& x = s[st];
    EXPECT_EQ(x.latency.items, x.items) << StageName(st);
    EXPECT_GT(x.latency.p50_ns, 0) << StageName(st);
    EXPECT_LE(x.latency.p50_ns, x.latency.p99_ns) << StageName(st);
    EXPECT_LE(x.latency.p99_ns, x.latency.max_ns) << StageName(st);
    // No item is longer than the stage's whole busy time, nor the mean above the max.
    EXPECT_LE(x.latency.max_ns, x.busy_ns) << StageName(st);
    EXPECT_LE(x.busy_ns / static_cast<int64_t>(x.items), x.latency.max_ns) << StageName(st);
  }
}

// Work done while the consumer is outside its span (a trainer evaluating) is counted apart:
// every item that ends while the span is closed adds its samples to samples_outside_span, and
// nothing else changes.
TEST(PipelineStageWaits, WorkOutsideTheConsumersSpanIsCounted) {
  TestDataset data(1024, 1024, 16);
  PipelineOptions o;
  o.order.batch_size = 16;
  o.order.shuffle = false;
  o.resources.threads = 2;
  o.resources.pool_size = 64;  // the whole run: every batch can be built while outside
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  (*p)->SetConsumerInSpan(false);
  // The pipeline starts building at Create: an item recorded before the span closed counts in
  // it (a slow main thread, under TSan, let a few through). Everything recorded after counts
  // outside, so at least what was not yet recorded here.
  const PipelineStats closed = (*p)->Stats();
  // Outside the span until every stage has recorded all its items (a stage records an item
  // after handing it on, so the reader's last frame may be recorded after the last batch).
  const auto all_recorded = [&p] {
    const PipelineStats s = (*p)->Stats();
    for (Stage st : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
      if (s[st].samples != 1024) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!all_recorded() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(all_recorded()) << "within 60 s, not every sample was built: "
                              << (*p)->Stats().ToString();
  (*p)->SetConsumerInSpan(true);
  BatchLease lease;
  uint64_t batches = 0;
  while (*(*p)->Next(&lease)) ++batches;
  lease.Release();
  ASSERT_EQ(batches, 64u);
  const PipelineStats s = (*p)->Stats();
  for (Stage st : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    EXPECT_EQ(s[st].samples, 1024u) << StageName(st);
    EXPECT_GE(s[st].samples_outside_span, 1024u - closed[st].samples) << StageName(st);
    EXPECT_LE(s[st].samples_outside_span, 1024u) << StageName(st);
  }
  // A consumer that never leaves its span (Python's pass) counts nothing outside.
  auto q = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(q.ok()) << q.status();
  while (*(*q)->Next(&lease)) {
  }
  lease.Release();
  EXPECT_EQ((*q)->Stats()[Stage::kPreprocess].samples_outside_span, 0u);
}

}  // namespace
}  // namespace sluice::testing
