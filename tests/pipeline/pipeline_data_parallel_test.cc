// Data-parallel slices end to end: pipelines of several ranks in one process, against the
// one-process pipeline and the dataset (every sample encodes its record index).
#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "pipeline/internal/order_planner.h"
#include "pipeline/pipeline.h"
#include "tests/pipeline/test_util.h"

namespace sluice::testing {
namespace {

// One delivered batch, as a rank saw it.
struct RankBatch {
  uint64_t epoch = 0, step = 0;
  uint32_t global_size = 0;
  std::vector<uint32_t> record_ids;
  std::vector<uint32_t> sample_ids;  // decoded from the samples themselves
  std::vector<int32_t> labels;
};

RankBatch Capture(const BatchView& v) {
  RankBatch b;
  b.epoch = v.epoch;
  b.step = v.step;
  b.global_size = v.global_size;
  if (v.size > 0) {
    EXPECT_NE(v.record_ids, nullptr);
    if (v.record_ids != nullptr) b.record_ids.assign(v.record_ids, v.record_ids + v.size);
  }
  const Batch decoded = ToBatch(v);
  b.sample_ids = decoded.ids;
  b.labels = decoded.labels;
  return b;
}

// Runs one pipeline per rank of `world`, all alive at once, taking one batch from each in
// turn (as ranks stepping together would). Each rank's batches go to out[rank].
absl::Status RunRanks(const Dataset* dataset, PipelineOptions o, uint32_t world,
                      std::vector<std::vector<RankBatch>>* out,
                      std::vector<PipelineStats>* stats = nullptr) {
  std::vector<std::unique_ptr<Pipeline>> pipelines;
  for (uint32_t r = 0; r < world; ++r) {
    o.slice = DataParallelSlice{r, world};
    ASSIGN_OR_RETURN(auto p, Pipeline::Create(dataset, o));
    pipelines.push_back(std::move(p));
  }
  out->assign(world, {});
  std::vector<BatchLease> leases(world);
  std::vector<bool> done(world, false);
  while (std::count(done.begin(), done.end(), false) > 0) {
    for (uint32_t r = 0; r < world; ++r) {
      if (done[r]) continue;
      ASSIGN_OR_RETURN(bool got, pipelines[r]->Next(&leases[r]));
      if (!got) {
        done[r] = true;
        continue;
      }
      (*out)[r].push_back(Capture(leases[r].view()));
    }
  }
  for (uint32_t r = 0; r < world; ++r) {
    leases[r].Release();
    if (stats != nullptr) stats->push_back(pipelines[r]->Stats());
    // Lockstep: with several ranks every step is delivered (one process skips empty ones).
    if (world > 1 && pipelines[r]->total_batches() != (*out)[r].size()) {
      return absl::InternalError("total_batches() disagrees with the batches delivered");
    }
  }
  return absl::OkStatus();
}

bool OkOrPrint(const absl::Status& s) {
  EXPECT_TRUE(s.ok()) << s;
  return s.ok();
}

pipeline_internal::SplitLayout LayoutOf(const Dataset& d) {
  pipeline_internal::SplitLayout l;
  for (size_t i = 0; i < d.manifest().shards.size(); ++i) {
    const ShardReader* r = *d.shard(i);
    for (uint32_t f = 0; f < r->frame_count(); ++f) {
      l.frames.push_back(pipeline_internal::FrameRef{
          static_cast<uint32_t>(i), f,
          d.manifest().shards[i].first_record + r->frames()[f].first_record,
          r->frames()[f].record_count});
    }
  }
  l.record_count = d.record_count();
  return l;
}

struct WorldCase {
  uint32_t world;
  uint32_t batch;
};

class RanksTogether : public ::testing::TestWithParam<WorldCase> {};

TEST_P(RanksTogether, DeliverTheWorldOneBatchesStepForStep) {
  const uint32_t world = GetParam().world;
  TestDataset data(250, 100, 16);  // 18 frames; 250 % 8 = 2: a last global batch below 3 ranks
  PipelineOptions o;
  o.order.batch_size = GetParam().batch;
  o.order.seed = 42;
  o.order.shuffle_window_frames = 3;
  o.resources.threads = 2;
  o.resources.pool_size = 3;
  o.span.epochs = 2;
  std::vector<std::vector<RankBatch>> one, ranks;
  std::vector<PipelineStats> one_stats, rank_stats;
  ASSERT_TRUE(OkOrPrint(RunRanks(data.dataset.get(), o, 1, &one, &one_stats)));
  ASSERT_TRUE(OkOrPrint(RunRanks(data.dataset.get(), o, world, &ranks, &rank_stats)));
  const std::vector<RankBatch>& reference = one[0];
  const uint64_t steps = (250 + o.order.batch_size - 1) / o.order.batch_size;
  ASSERT_EQ(reference.size(), 2 * steps);

  // One process: record ids are the planner's order, and the samples are those records.
  const pipeline_internal::SplitLayout layout = LayoutOf(*data.dataset);
  for (uint64_t e = 0; e < 2; ++e) {
    auto plan = pipeline_internal::PlanEpoch(
        layout, pipeline_internal::OrderOptions{42, true, 3, o.order.batch_size, false}, e, 0);
    ASSERT_TRUE(plan.ok());
    std::vector<uint32_t> delivered;
    for (const RankBatch& b : reference) {
      if (b.epoch != e) continue;
      EXPECT_EQ(b.record_ids, b.sample_ids);
      EXPECT_EQ(b.global_size, b.record_ids.size());
      delivered.insert(delivered.end(), b.record_ids.begin(), b.record_ids.end());
    }
    EXPECT_EQ(delivered, plan->order) << "epoch " << e;
  }

  // Every rank delivers every step (lockstep), and the ranks' batches of a step are the
  // one-process batch of that step, split in sizes that differ by at most one.
  uint64_t empty = 0, samples = 0;
  for (uint32_t r = 0; r < world; ++r) {
    ASSERT_EQ(ranks[r].size(), reference.size()) << "rank " << r;
    samples += rank_stats[r].samples_delivered;
  }
  EXPECT_EQ(samples, one_stats[0].samples_delivered);
  for (size_t i = 0; i < reference.size(); ++i) {
    std::multiset<uint32_t> got;
    for (uint32_t r = 0; r < world; ++r) {
      const RankBatch& b = ranks[r][i];
      ASSERT_EQ(b.epoch, reference[i].epoch) << "rank " << r << " batch " << i;
      ASSERT_EQ(b.step, reference[i].step) << "rank " << r << " batch " << i;
      EXPECT_EQ(b.global_size, reference[i].global_size);
      EXPECT_EQ(b.record_ids, b.sample_ids) << "rank " << r << " batch " << i;
      for (size_t k = 0; k < b.labels.size(); ++k) {
        EXPECT_EQ(b.labels[k], static_cast<int32_t>(b.sample_ids[k] % 10));
      }
      const uint32_t count = reference[i].global_size;
      EXPECT_EQ(b.record_ids.size(), count / world + (r < count % world ? 1 : 0));
      empty += b.record_ids.empty();
      got.insert(b.record_ids.begin(), b.record_ids.end());
    }
    EXPECT_EQ(got, std::multiset<uint32_t>(reference[i].record_ids.begin(),
                                           reference[i].record_ids.end()))
        << "batch " << i;
  }
  if (250 % o.order.batch_size < world && 250 % o.order.batch_size != 0) {
    EXPECT_EQ(empty, 2 * (world - 250 % o.order.batch_size)) << "empty last batches, per epoch";
  }

  // Decoding: one process decodes every frame once per epoch; each rank only frames of its
  // samples, and together at least as many as one process.
  EXPECT_EQ(one_stats[0].frames_decoded, 2 * 18u);
  uint64_t decoded = 0;
  for (uint32_t r = 0; r < world; ++r) {
    EXPECT_LE(rank_stats[r].frames_decoded, one_stats[0].frames_decoded);
    decoded += rank_stats[r].frames_decoded;
  }
  EXPECT_GE(decoded, one_stats[0].frames_decoded);
}

INSTANTIATE_TEST_SUITE_P(Worlds, RanksTogether,
                         ::testing::Values(WorldCase{2, 7}, WorldCase{2, 8}, WorldCase{3, 8},
                                           WorldCase{4, 8}));

TEST(DataParallel, AllSkippedSliceIsDeliveredEmptyInLockstep) {
  TestDataset data(64, 64, 16);
  data.CorruptFrame(0, 1);  // records [16, 32): global steps 2 and 3 with shuffle off, B 8
  PipelineOptions o;
  o.order.shuffle = false;
  o.order.batch_size = 8;
  o.resources.threads = 2;
  o.on_corrupt = OnCorrupt::kSkip;
  std::vector<std::vector<RankBatch>> one, ranks;
  std::vector<PipelineStats> one_stats, rank_stats;
  ASSERT_TRUE(OkOrPrint(RunRanks(data.dataset.get(), o, 1, &one, &one_stats)));
  ASSERT_TRUE(OkOrPrint(RunRanks(data.dataset.get(), o, 2, &ranks, &rank_stats)));
  EXPECT_EQ(one[0].size(), 6u);  // one process: the two empty steps are not delivered
  EXPECT_EQ(one_stats[0].empty_batches, 2u);
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].size(), 8u) << "rank " << r;
    for (uint64_t s = 0; s < 8; ++s) {
      const RankBatch& b = ranks[r][s];
      EXPECT_EQ(b.step, s);
      EXPECT_EQ(b.global_size, 8u);
      EXPECT_EQ(b.record_ids.size(), s == 2 || s == 3 ? 0u : 4u) << "rank " << r << " step " << s;
      EXPECT_EQ(b.record_ids, b.sample_ids);
    }
    EXPECT_EQ(rank_stats[r].skipped_frames, 1u);
    EXPECT_EQ(rank_stats[r].frames_decoded, 3u);
  }
}

// Ranks 2 and 3 of 4 get no sample of any global batch of 2, so they read no frame at all:
// their empty batches must still come, one per step, and the run must end.
TEST(DataParallel, RankWithNoSampleAtAllStillDeliversEveryStep) {
  TestDataset data(6, 6, 2);
  PipelineOptions o;
  o.order.shuffle = false;
  o.order.batch_size = 2;
  o.resources.threads = 2;
  o.span.epochs = 2;
  std::vector<std::vector<RankBatch>> ranks;
  std::vector<PipelineStats> stats;
  ASSERT_TRUE(OkOrPrint(RunRanks(data.dataset.get(), o, 4, &ranks, &stats)));
  for (uint32_t r = 0; r < 4; ++r) {
    ASSERT_EQ(ranks[r].size(), 6u) << "rank " << r;
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(ranks[r][i].step, i % 3);
      EXPECT_EQ(ranks[r][i].record_ids.size(), r < 2 ? 1u : 0u);
    }
    EXPECT_EQ(stats[r].frames_decoded, r < 2 ? 6u : 0u) << "rank " << r;
  }
}

TEST(DataParallel, SliceOutsideTheWorldIsInvalidArgument) {
  TestDataset data(64, 64, 16);
  PipelineOptions o;
  for (DataParallelSlice slice : {DataParallelSlice{0, 0}, DataParallelSlice{2, 2}}) {
    o.slice = slice;
    auto p = Pipeline::Create(data.dataset.get(), o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace sluice::testing
