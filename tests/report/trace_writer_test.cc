#include "report/render/trace_writer.h"

#include <stdlib.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "storage/dataset_writer.h"

namespace sluice {
namespace {

using json = nlohmann::json;

// Track names by tid, from the thread_name metadata.
std::map<int, std::string> Tracks(const json& trace) {
  std::map<int, std::string> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") out[e["tid"]] = e["args"]["name"];
  }
  return out;
}

// Index in traceEvents of the "X" event of `stage` for item `id` ("frame" or "batch" arg).
int IndexOf(const json& trace, const std::string& name, const char* arg, uint64_t id) {
  const json& ev = trace["traceEvents"];
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i]["ph"] == "X" && ev[i]["name"] == name && ev[i]["args"].contains(arg) &&
        ev[i]["args"][arg] == id) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int64_t MaxCounter(const json& trace, const std::string& name) {
  int64_t m = -1;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == name)
      m = std::max<int64_t>(m, e["args"].begin()->get<int64_t>());
  }
  return m;
}

constexpr int64_t kUs = 1000;

RunRecord SyntheticRun(bool cuda) {
  RunRecord r;
  r.compute.is_cuda = cuda;
  r.compute.on_device = cuda;
  r.device = cuda ? "cuda:0 (test)" : "cpu (test)";
  const int64_t t = 5'000'000'000;
  // Batch b is frame b: read on thread 0, decompress and preprocess on thread 1 or 2,
  // (h2d,) compute. Batches overlap: b+1 is preprocessed while b computes.
  for (uint64_t b = 0; b < 3; ++b) {
    const int64_t s = t + static_cast<int64_t>(b) * 100 * kUs;
    const uint32_t worker = 1 + static_cast<uint32_t>(b % 2);
    r.trace.push_back({Stage::kRead, b, 0, s, s + 10 * kUs});
    r.trace.push_back({Stage::kDecompress, b, worker, s + 10 * kUs, s + 40 * kUs});
    r.trace.push_back({Stage::kPreprocess, b, worker, s + 40 * kUs, s + 60 * kUs});
    int64_t ready = s + 60 * kUs;
    if (cuda) {
      r.trace.push_back({Stage::kH2D, b, 7, s + 60 * kUs, s + 70 * kUs});
      ready = s + 70 * kUs;
    }
    r.compute_spans.push_back({b, ready + 5 * kUs, ready + 150 * kUs});
  }
  r.pipeline.pool_buffers = 4;
  return r;
}

TEST(TraceWriterTest, ValidJsonWithTracksCountersAndStageOrder) {
  const json built = BuildChromeTrace(SyntheticRun(/*cuda=*/false));
  const json trace = json::parse(built.dump());  // valid JSON text
  ASSERT_TRUE(trace.contains("traceEvents"));
  const auto tracks = Tracks(trace);
  EXPECT_EQ(tracks.at(0), "pipeline thread 0");
  EXPECT_EQ(tracks.at(1), "pipeline thread 1");
  EXPECT_EQ(tracks.at(2), "pipeline thread 2");
  EXPECT_EQ(tracks.at(kTraceTidCompute), "compute");
  EXPECT_FALSE(tracks.count(kTraceTidCopyStream));  // no copies on the CPU
  for (uint64_t b = 0; b < 3; ++b) {
    SCOPED_TRACE(b);
    const int read = IndexOf(trace, "read", "frame", b);
    const int dec = IndexOf(trace, "decompress", "frame", b);
    const int pre = IndexOf(trace, "preprocess", "batch", b);
    const int comp = IndexOf(trace, "compute", "batch", b);
    ASSERT_GE(read, 0);
    EXPECT_LT(read, dec);
    EXPECT_LT(dec, pre);
    EXPECT_LT(pre, comp);
  }
  // Timestamps are microseconds from the earliest span.
  EXPECT_EQ(trace["traceEvents"][IndexOf(trace, "read", "frame", 0)]["ts"], 0.0);
  EXPECT_EQ(trace["traceEvents"][IndexOf(trace, "decompress", "frame", 1)]["ts"], 110.0);
  // Buffers are held from preprocess start (40, 140, 240 us) to compute end (210, 310, 410):
  // two at once at most.
  EXPECT_EQ(MaxCounter(trace, "pinned pool occupancy"), 2);
  EXPECT_EQ(MaxCounter(trace, "device ring occupancy"), -1);  // none on the CPU
}

TEST(TraceWriterTest, DeviceRunHasCopyStreamAndRingCounter) {
  const json trace = BuildChromeTrace(SyntheticRun(/*cuda=*/true));
  const auto tracks = Tracks(trace);
  EXPECT_EQ(tracks.at(kTraceTidCopyStream), "copy stream");
  EXPECT_EQ(tracks.at(kTraceTidCompute), "compute stream (device time)");
  EXPECT_FALSE(tracks.count(7));  // the h2d span's thread is not a pipeline track
  const int h2d = IndexOf(trace, "h2d", "batch", 1);
  ASSERT_GE(h2d, 0);
  EXPECT_EQ(trace["traceEvents"][h2d]["tid"], kTraceTidCopyStream);
  EXPECT_LT(IndexOf(trace, "preprocess", "batch", 1), h2d);
  EXPECT_LT(h2d, IndexOf(trace, "compute", "batch", 1));
  // Pinned buffers go back when the copy completes: never two at once here.
  EXPECT_EQ(MaxCounter(trace, "pinned pool occupancy"), 1);
  // A ring slot is held from copy start to the end of its step: two overlap.
  EXPECT_EQ(MaxCounter(trace, "device ring occupancy"), 2);
  // Copies of batches 1 and 2 run while the previous batch computes; batch 0's cannot.
  EXPECT_NEAR(trace["otherData"]["copy_hidden_share"].get<double>(), 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(CopyHiddenShare(SyntheticRun(/*cuda=*/true)), 2.0 / 3.0, 1e-9);
  EXPECT_EQ(CopyHiddenShare(SyntheticRun(/*cuda=*/false)), -1);  // no copies
}

// pid -> the process_name of every event's pid (events of a pid without a name map to "").
std::map<int, std::string> Processes(const json& trace) {
  std::map<int, std::string> out;
  for (const json& e : trace["traceEvents"]) {
    const int pid = e["pid"];
    if (e["ph"] == "M" && e["name"] == "process_name") {
      out[pid] = e["args"]["name"];
    } else if (!out.count(pid)) {
      out[pid] = "";
    }
  }
  return out;
}

TEST(TraceWriterTest, ASingleProcessIsPidOneNamedSluice) {
  EXPECT_EQ(Processes(BuildChromeTrace(SyntheticRun(false))),
            (std::map<int, std::string>{{1, "sluice"}}));
}

TEST(TraceWriterTest, TwoRanksAreTwoProcessesOnOneTimeline) {
  std::vector<json> traces;
  for (int r = 0; r < 2; ++r) {
    RunRecord run = SyntheticRun(false);
    run.rank = r;
    run.world_size = 2;
    // Rank 1 started 1 ms after rank 0 on the same steady clock.
    for (TraceSpan& s : run.trace) s.start_ns += r * 1000 * kUs, s.end_ns += r * 1000 * kUs;
    for (ComputeSpan& s : run.compute_spans)
      s.start_ns += r * 1000 * kUs, s.end_ns += r * 1000 * kUs;
    traces.push_back(BuildChromeTrace(run));
  }
  const json merged = json::parse(MergeRankTraces(traces, /*shared_clock=*/true).dump());
  EXPECT_EQ(Processes(merged), (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(merged["otherData"]["world_size"], 2);
  // Each rank has its own three compute spans; rank 1's first read is 1 ms after rank 0's.
  std::map<int, int> compute;
  std::map<int, double> first_read;
  for (const json& e : merged["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "compute") ++compute[e["pid"]];
    if (e["name"] == "read" && !first_read.count(e["pid"])) first_read[e["pid"]] = e["ts"];
  }
  EXPECT_EQ(compute, (std::map<int, int>{{0, 3}, {1, 3}}));
  EXPECT_EQ(first_read[0], 0.0);
  EXPECT_EQ(first_read[1], 1000.0);
  // Without a shared clock each rank starts at its own first span.
  const json apart = MergeRankTraces(traces, /*shared_clock=*/false);
  for (const json& e : apart["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "read" && e["pid"] == 1 && e["args"]["frame"] == 0) {
      EXPECT_EQ(e["ts"], 0.0);
    }
  }
}

TEST(TraceWriterTest, EmptyRunIsValidMetadataOnly) {
  const json trace = json::parse(BuildChromeTrace(RunRecord{}).dump());
  for (const json& e : trace["traceEvents"]) EXPECT_EQ(e["ph"], "M");
}

TEST(TraceWriterTest, RealPipelineSpansOfABatchAreInStageOrder) {
  std::string dir = absl::StrCat(::testing::TempDir(), "/sluice_trace_XXXXXX");
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  RecordArrays r;
  r.spec.height = 28;
  r.spec.width = 28;
  r.count = 320;
  r.samples.assign(r.count * 784, 3);
  r.labels.assign(r.count, 1);
  WriteDatasetOptions w;
  w.sharding.records_per_frame = 32;  // one frame per batch: frame k is batch k
  w.threads = 1;
  ASSERT_TRUE(WriteDataset(Env::Default(), dir, "train", r, w).ok());
  auto ds = Dataset::Open(Env::Default(), dir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  PipelineOptions po;
  po.order.batch_size = 32;
  po.order.shuffle = false;
  po.resources.threads = 2;
  po.diagnostics.trace_capacity = 1000;
  auto p = Pipeline::Create(ds->get(), po);
  ASSERT_TRUE(p.ok()) << p.status();
  RunRecord result;
  BatchLease lease;
  while (true) {
    const int64_t start = NowNs();
    auto got = (*p)->Next(&lease);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!*got) break;
    const int64_t end = NowNs();
    result.compute_spans.push_back({lease.batch_id(), start, end});
    lease.Release();
  }
  result.trace = (*p)->Trace();
  result.pipeline = (*p)->Stats();
  ASSERT_EQ(result.compute_spans.size(), 10u);
  const json trace = json::parse(BuildChromeTrace(result).dump());
  std::set<std::string> names;
  for (const auto& [tid, name] : Tracks(trace)) names.insert(name);
  EXPECT_TRUE(names.count("compute"));
  EXPECT_GE(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("pipeline thread", 0) == 0; }),
            1);
  for (uint64_t b = 0; b < 10; ++b) {
    SCOPED_TRACE(b);
    const int read = IndexOf(trace, "read", "frame", b);
    const int dec = IndexOf(trace, "decompress", "frame", b);
    const int pre = IndexOf(trace, "preprocess", "batch", b);
    const int comp = IndexOf(trace, "compute", "batch", b);
    ASSERT_GE(read, 0);
    ASSERT_GE(dec, 0);
    ASSERT_GE(pre, 0);
    ASSERT_GE(comp, 0);
    EXPECT_LE(read, dec);
    EXPECT_LE(dec, pre);
    // The consumer's span starts when it asks, possibly before the batch exists; it ends
    // after the preprocess span of that batch ended.
    const json& pe = trace["traceEvents"][pre];
    const json& ce = trace["traceEvents"][comp];
    EXPECT_GE(ce["ts"].get<double>() + ce["dur"].get<double>(),
              pe["ts"].get<double>() + pe["dur"].get<double>());
  }
  EXPECT_GE(MaxCounter(trace, "pinned pool occupancy"), 1);
  EXPECT_LE(MaxCounter(trace, "pinned pool occupancy"),
            static_cast<double>(result.pipeline.pool_buffers));
}

}  // namespace
}  // namespace sluice
