// BottleneckReport::ToText and ToJson. The JSON fields and units are documented in
// docs/report-schema.md; keep the two in step.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/diagnostics/bottleneck_report.h"

namespace sluice {
namespace report_internal {
std::string FormatRate(double samples_per_s);  // bottleneck_verdict.cc
}  // namespace report_internal

namespace {

using report_internal::FormatRate;

nlohmann::ordered_json Optional(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json RowJson(const StageRow& r) {
  nlohmann::ordered_json j;
  j["stage"] = ReportStageName(r.stage);
  j["present"] = r.present;
  j["cpu_work"] = r.cpu_work;
  j["concurrency"] = r.concurrency;
  j["items"] = r.items;
  j["samples"] = r.samples;
  j["bytes"] = r.bytes;
  j["items_per_s"] = r.items_per_s;
  j["samples_per_s"] = r.samples_per_s;
  j["busy_ns"] = r.busy_ns;
  j["busy_pct"] = r.busy_pct;
  j["wait_input_pct"] = r.wait_input_pct;
  j["wait_output_pct"] = r.wait_output_pct;
  j["queue_high_water"] = r.queue_high_water;
  j["capacity_samples_per_s"] = Optional(r.capacity_samples_per_s);
  j["cpu_ns_per_sample"] = r.cpu_ns_per_sample;
  j["ceiling_samples_per_s"] = Optional(r.ceiling_samples_per_s);
  j["pct_of_ceiling"] = Optional(r.pct_of_ceiling);
  j["attributed_wait_pct"] = r.attributed_wait_pct;
  return j;
}

}  // namespace

std::string BottleneckReport::ToText() const {
  std::string out = absl::StrFormat(
      "bottleneck report: %s, %d cores, %.3f s training, %d samples in %d steps\n", device, cores,
      train_seconds, samples, steps);
  absl::StrAppendFormat(&out, "%-11s %4s %9s %18s %6s %7s %8s %5s %18s %6s %6s\n", "stage",
                        "conc", "items", "rate", "busy%", "wait-in", "wait-out", "q-hw",
                        "capacity", "ceil%", "wait%");
  for (const StageRow& r : stages) {
    if (!r.present) {
      absl::StrAppendFormat(&out, "%-11s %s\n", ReportStageName(r.stage), "-- (not in this run)");
      continue;
    }
    const bool pinned = r.stage == ReportStage::kPinnedWait;
    absl::StrAppendFormat(
        &out, "%-11s %4s %9d %18s %6.1f %7.1f %8.1f %5d %18s %6s %6.1f\n", ReportStageName(r.stage),
        pinned ? "-" : absl::StrCat(r.concurrency), r.items,
        pinned ? "-" : FormatRate(r.samples_per_s), r.busy_pct, r.wait_input_pct,
        r.wait_output_pct, r.queue_high_water,
        r.capacity_samples_per_s ? FormatRate(*r.capacity_samples_per_s) : "-",
        r.pct_of_ceiling ? absl::StrFormat("%.0f", *r.pct_of_ceiling) : "-",
        r.attributed_wait_pct);
  }
  absl::StrAppendFormat(&out,
                        "measured %s; predicted %s (slowest capacity %s; CPU limit %s on %d "
                        "cores, %.2f threads busy)\n",
                        FormatRate(measured_samples_per_s), FormatRate(predicted_samples_per_s),
                        FormatRate(capacity_limit_samples_per_s),
                        FormatRate(cpu_limit_samples_per_s), cores, cpu_threads_busy);
  absl::StrAppendFormat(&out, "pool %d pinned buffers, frame budget %d, device ring %d\n",
                        pipeline.pool_buffers, pipeline.frame_budget, pipeline.ring_depth);
  absl::StrAppend(&out, "verdict: ", sentence, "\n");
  for (const std::string& n : notes) absl::StrAppend(&out, "note: ", n, "\n");
  absl::StrAppend(&out, FormatMemoryReport(memory, memory_formula));
  return out;
}

nlohmann::ordered_json BottleneckReport::ToJson() const {
  nlohmann::ordered_json j;
  j["schema"] = kReportSchema;
  j["device"] = device;
  j["is_cuda"] = is_cuda;
  j["cores"] = cores;
  j["train_seconds"] = train_seconds;
  j["samples"] = samples;
  j["steps"] = steps;
  j["measured_samples_per_s"] = measured_samples_per_s;
  j["predicted_samples_per_s"] = predicted_samples_per_s;
  j["capacity_limit_samples_per_s"] = capacity_limit_samples_per_s;
  j["cpu_limit_samples_per_s"] = cpu_limit_samples_per_s;
  j["cpu_threads_busy"] = cpu_threads_busy;
  j["cpu_saturated"] = cpu_saturated;
  j["input_bound_pct"] = input_bound_pct;
  j["compute_host_pct"] = compute_host_pct;
  nlohmann::ordered_json v;
  v["class"] = VerdictClassName(verdict);
  v["limiting_stage"] = ReportStageName(limiting_stage);
  v["sentence"] = sentence;
  j["verdict"] = v;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const StageRow& r : stages) rows.push_back(RowJson(r));
  j["stages"] = rows;
  nlohmann::ordered_json p;
  p["pool_buffers"] = pipeline.pool_buffers;
  p["frame_budget"] = pipeline.frame_budget;
  p["ring_depth"] = pipeline.ring_depth;
  p["threads"] = pipeline.threads;
  p["batches_delivered"] = pipeline.batches_delivered;
  p["samples_delivered"] = pipeline.samples_delivered;
  p["skipped_frames"] = pipeline.skipped_frames;
  p["skipped_records"] = pipeline.skipped_records;
  p["trace_dropped"] = pipeline.trace_dropped;
  j["pipeline"] = p;
  nlohmann::ordered_json m;
  nlohmann::ordered_json tags;
  for (int t = 0; t < static_cast<int>(MemoryTag::kCount); ++t) {
    nlohmann::ordered_json e;
    e["current_bytes"] = memory.current_bytes[t];
    e["peak_bytes"] = memory.peak_bytes[t];
    std::string name(MemoryTagName(static_cast<MemoryTag>(t)));
    std::replace(name.begin(), name.end(), ' ', '_');  // "optimizer state" -> optimizer_state
    tags[name] = e;
  }
  m["tags"] = tags;
  m["total_current_bytes"] = memory.total_current;
  m["total_peak_bytes"] = memory.total_peak;
  nlohmann::ordered_json f;
  f["parameters"] = memory_formula.parameters;
  f["gradients"] = memory_formula.gradients;
  f["optimizer_state"] = memory_formula.optimizer_state;
  f["activations"] = memory_formula.activations;
  f["total"] = memory_formula.total();
  m["formula_bytes"] = f;
  j["memory"] = m;
  j["ceilings"] = ceilings ? ceilings->ToJson() : nlohmann::ordered_json(nullptr);
  j["notes"] = notes;
  return j;
}

}  // namespace sluice
