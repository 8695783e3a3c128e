#include "report/render/trace_writer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/stages.h"

namespace sluice {
namespace {

using json = nlohmann::json;

// A trace's events: the metadata first, then the spans in time order.
json MetadataThenEventsInTime(std::vector<json> meta, std::vector<json> events) {
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  json all = json::array();
  for (json& e : meta) all.push_back(std::move(e));
  for (json& e : events) all.push_back(std::move(e));
  return all;
}

// The process of a run's events: pid 1 "sluice" in a single process; pid R "rank R" in a
// data-parallel run (trace_writer.h).
int TracePid(const RunRecord& run) { return run.world_size > 1 ? run.rank : 1; }

json Meta(int pid, const char* what, int tid, json args) {
  json e = {{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

json ThreadName(int pid, int tid, const std::string& name, int sort_index) {
  return {Meta(pid, "thread_name", tid, {{"name", name}}),
          Meta(pid, "thread_sort_index", tid, {{"sort_index", sort_index}})};
}

// Emits counter events for intervals [start, end): the number open after each change.
void AddCounter(int pid, const char* name, const char* key,
                const std::vector<std::pair<int64_t, int64_t>>& intervals, int64_t t0,
                std::vector<json>* out) {
  std::vector<std::pair<int64_t, int>> changes;
  for (const auto& [s, e] : intervals) {
    changes.emplace_back(s, +1);
    changes.emplace_back(e, -1);
  }
  std::sort(changes.begin(), changes.end());  // at equal times, releases (-1) first
  int64_t value = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    value += changes[i].second;
    if (i + 1 < changes.size() && changes[i + 1].first == changes[i].first) continue;
    out->push_back({{"ph", "C"},
                    {"pid", pid},
                    {"name", name},
                    {"ts", (changes[i].first - t0) / 1e3},
                    {"args", {{key, value}}}});
  }
}

// The track of a pipeline span of `stage` that is not its thread's: its stage's
// (report_stages.h); kDelivery, the consumer's side and not a row of the report, has its own.
// -1: the span is drawn on the pipeline thread that ran it.
int OwnTrackTid(Stage stage) {
  if (stage == Stage::kDelivery) return kTraceTidDelivery;
  const ReportStageInfo* info = FindReportStage(stage);
  switch (info == nullptr ? TraceTrack::kWorkerThread : info->track) {
    case TraceTrack::kPinnedWait:
      return kTraceTidPinnedWait;
    case TraceTrack::kCopyStream:
      return kTraceTidCopyStream;
    case TraceTrack::kCompute:
      return kTraceTidCompute;
    case TraceTrack::kWorkerThread:
      break;
  }
  return -1;
}

}  // namespace

double CopyHiddenShare(const RunRecord& run) {
  std::vector<std::pair<int64_t, int64_t>> compute;
  for (const ComputeSpan& c : run.compute_spans) {
    compute.emplace_back(std::max(c.start_ns, std::min(c.enqueued_ns, c.end_ns)), c.end_ns);
  }
  std::sort(compute.begin(), compute.end());
  // Merge overlapping compute spans so no copy time is counted twice.
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& c : compute) {
    if (!merged.empty() && c.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, c.second);
    } else {
      merged.push_back(c);
    }
  }
  int64_t copy = 0, hidden = 0;
  for (const TraceSpan& s : run.trace) {
    if (s.stage != Stage::kH2D || s.end_ns <= s.start_ns) continue;
    copy += s.end_ns - s.start_ns;
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(s.start_ns, INT64_MAX));
    if (it != merged.begin()) --it;
    for (; it != merged.end() && it->first < s.end_ns; ++it) {
      hidden +=
          std::max<int64_t>(0, std::min(s.end_ns, it->second) - std::max(s.start_ns, it->first));
    }
  }
  return copy > 0 ? static_cast<double>(hidden) / copy : -1;
}

namespace {

// The events of one run's trace as they are built, and what the occupancy counters need.
struct TraceBuilder {
  int pid = 0;
  int64_t t0 = 0;
  std::vector<json> events;
  std::set<uint32_t> threads;  // pipeline threads that ran a span
  std::set<int> special;       // the own tracks that have a span
  // Per batch: preprocess start, the h2d span, the earliest release (delivery/compute end).
  std::map<uint64_t, int64_t> pre_start, h2d_start, h2d_end, delivery_end, compute_end;
};

// One "X" event per pipeline span, on its thread's track or its stage's own track.
void AddPipelineSpans(const RunRecord& run, TraceBuilder* b) {
  for (const TraceSpan& s : run.trace) {
    int tid = OwnTrackTid(s.stage);
    if (tid < 0) {
      tid = static_cast<int>(s.thread);
      b->threads.insert(s.thread);
    }
    if (tid >= kTraceTidPinnedWait) b->special.insert(tid);
    const ReportStageInfo* info = FindReportStage(s.stage);
    // A frame's sequence number, an image's record id (decode spans, nested inside their
    // batch's preprocess span on the same thread), or a batch id.
    const std::string_view unit = info != nullptr ? info->unit : "batch";
    const char* key = unit == "frame" ? "frame" : unit == "image" ? "record" : "batch";
    b->events.push_back({{"ph", "X"},
                         {"pid", b->pid},
                         {"tid", tid},
                         {"name", std::string(StageName(s.stage))},
                         {"cat", "pipeline"},
                         {"ts", (s.start_ns - b->t0) / 1e3},
                         {"dur", (s.end_ns - s.start_ns) / 1e3},
                         {"args", {{key, s.id}}}});
    if (s.stage == Stage::kPreprocess) b->pre_start[s.id] = s.start_ns;
    if (s.stage == Stage::kH2D) {
      b->h2d_start[s.id] = s.start_ns;
      b->h2d_end[s.id] = s.end_ns;
    }
    if (s.stage == Stage::kDelivery) b->delivery_end[s.id] = s.end_ns;
  }
  for (const ComputeSpan& s : run.compute_spans) {
    b->special.insert(kTraceTidCompute);
    b->events.push_back({{"ph", "X"},
                         {"pid", b->pid},
                         {"tid", kTraceTidCompute},
                         {"name", StageName(Stage::kCompute)},
                         {"cat", StageName(Stage::kCompute)},
                         {"ts", (s.start_ns - b->t0) / 1e3},
                         {"dur", (s.end_ns - s.start_ns) / 1e3},
                         {"args", {{"batch", s.batch_id}}}});
    b->compute_end[s.batch_id] = s.end_ns;
  }
}

// Occupancy (trace_writer.h): a pinned buffer from preprocess start to the first release; a
// device slot from the copy's start to its step's end.
void AddOccupancy(bool device, TraceBuilder* b) {
  std::vector<std::pair<int64_t, int64_t>> pinned, ring;
  for (const auto& [id, start] : b->pre_start) {
    int64_t end = std::numeric_limits<int64_t>::max();
    for (const auto* m : {&b->h2d_end, &b->delivery_end, &b->compute_end}) {
      auto it = m->find(id);
      if (it != m->end()) end = std::min(end, it->second);
    }
    if (end != std::numeric_limits<int64_t>::max() && end >= start) pinned.emplace_back(start, end);
  }
  for (const auto& [id, start] : b->h2d_start) {
    auto it = b->compute_end.find(id);
    if (it != b->compute_end.end() && it->second >= start) ring.emplace_back(start, it->second);
  }
  AddCounter(b->pid, "pinned pool occupancy", "buffers", pinned, b->t0, &b->events);
  if (device || !ring.empty()) {
    AddCounter(b->pid, "device ring occupancy", "slots", ring, b->t0, &b->events);
  }
}

// The metadata naming each track that has a span.
void AddTrackNames(bool device, const TraceBuilder& b, std::vector<json>* meta) {
  for (uint32_t t : b.threads) {
    for (json& e : ThreadName(b.pid, static_cast<int>(t), absl::StrCat("pipeline thread ", t),
                              static_cast<int>(t))) {
      meta->push_back(std::move(e));
    }
  }
  const std::pair<int, const char*> names[] = {
      {kTraceTidPinnedWait, "pinned buffer wait"},
      {kTraceTidCopyStream, "copy stream"},
      {kTraceTidDelivery, "delivery (lease held)"},
      {kTraceTidCompute, device ? "compute stream (device time)" : "compute"}};
  for (const auto& [tid, name] : names) {
    if (!b.special.count(tid)) continue;
    for (json& e : ThreadName(b.pid, tid, name, tid)) meta->push_back(std::move(e));
  }
}

}  // namespace

json BuildChromeTrace(const RunRecord& run) {
  const bool device = run.compute.on_device || run.compute.is_cuda;
  TraceBuilder b;
  b.t0 = std::numeric_limits<int64_t>::max();
  for (const TraceSpan& s : run.trace) b.t0 = std::min(b.t0, s.start_ns);
  for (const ComputeSpan& s : run.compute_spans) b.t0 = std::min(b.t0, s.start_ns);
  if (b.t0 == std::numeric_limits<int64_t>::max()) b.t0 = 0;
  b.pid = TracePid(run);
  std::vector<json> meta = {Meta(
      b.pid, "process_name", -1,
      {{"name", run.world_size > 1 ? absl::StrCat("rank ", run.rank) : std::string("sluice")}})};
  if (run.world_size > 1) {
    meta.push_back(Meta(b.pid, "process_sort_index", -1, {{"sort_index", b.pid}}));
  }
  AddPipelineSpans(run, &b);
  AddOccupancy(device, &b);
  AddTrackNames(device, b, &meta);
  json all = MetadataThenEventsInTime(std::move(meta), std::move(b.events));
  return {{"traceEvents", std::move(all)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"producer", "sluice"},
            {"device", run.device},
            {"trace_dropped", run.pipeline.trace_dropped},
            {"copy_hidden_share", CopyHiddenShare(run)},
            {"time_origin_steady_ns", b.t0}}}};
}

json MergeRankTraces(const std::vector<json>& traces, bool shared_clock) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const json& t : traces) {
    origin = std::min(origin, t["otherData"]["time_origin_steady_ns"].get<int64_t>());
  }
  std::vector<json> meta, events;
  json ranks = json::array();
  for (const json& t : traces) {
    const double shift_us =
        shared_clock ? (t["otherData"]["time_origin_steady_ns"].get<int64_t>() - origin) / 1e3 : 0;
    for (const json& e : t["traceEvents"]) {
      if (e["ph"] == "M") {
        meta.push_back(e);
        continue;
      }
      json moved = e;
      moved["ts"] = e["ts"].get<double>() + shift_us;
      events.push_back(std::move(moved));
    }
    ranks.push_back(t["otherData"]);
  }
  json all = MetadataThenEventsInTime(std::move(meta), std::move(events));
  return {{"traceEvents", std::move(all)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"producer", "sluice"},
            {"world_size", traces.size()},
            {"shared_clock", shared_clock},
            {"time_origin_steady_ns", traces.empty() ? 0 : origin},
            {"ranks", std::move(ranks)}}}};
}

absl::Status WriteChromeTrace(Env* env, const std::string& path, const RunRecord& run) {
  return WriteFileAtomically(env, path, BuildChromeTrace(run).dump() + "\n");
}

}  // namespace sluice
