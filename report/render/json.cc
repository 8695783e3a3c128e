// BottleneckReport::ToJson. The JSON fields and units are documented in
// docs/report-schema.md; keep the two in step.
#include <algorithm>
#include <string>

#include "common/json_fields.h"
#include "report/analysis/bottleneck_report.h"

namespace sluice {

SLUICE_DEFINE_JSON_FIELDS(ChainOpShare, op, share_pct)
SLUICE_DEFINE_JSON_FIELDS(EpochSplit, first_epoch, later_epochs, first_samples_per_s,
                          later_samples_per_s, first_seconds, later_seconds, first_read_seconds,
                          later_read_seconds, first_read_mb_per_s, later_read_mb_per_s, differ,
                          ran_ahead, cold)

// The rows of "stages", each key the field's name (docs/report-schema.md, "stages").
SLUICE_DEFINE_JSON_FIELDS(StageRow, stage, present, cpu_work, concurrency, items, samples, bytes,
                          stored_bytes, items_per_s, samples_per_s, outside_span_pct, busy_ns,
                          busy_pct, wait_input_pct, wait_output_pct, queue_high_water,
                          capacity_samples_per_s, cpu_ns_per_sample, cores_busy,
                          ceiling_samples_per_s, pct_of_ceiling, attributed_wait_pct,
                          batches_waiting_avg, ops, outside_chain_pct, latency_p50_ns,
                          latency_p99_ns, latency_max_ns)

namespace {

// "model": the resource model's figures (docs/report-schema.md, "model").
nlohmann::ordered_json ModelJson(const BottleneckReport& r) {
  nlohmann::ordered_json bounds = nlohmann::ordered_json::array();
  for (const Bound& b : r.model.bounds) {
    bounds.push_back({{"constraint", ConstraintName(b.constraint)},
                      {"stage", b.stage},
                      {"samples_per_s", b.samples_per_s}});
  }
  nlohmann::ordered_json close = nlohmann::ordered_json::array();
  for (const Bound& b : r.model.close) close.push_back(b.stage);
  nlohmann::ordered_json if_free_json = nlohmann::ordered_json::array();
  for (const auto& [stage, rate] : r.if_free) {
    if_free_json.push_back({{"stage", stage}, {"samples_per_s", rate}});
  }
  nlohmann::ordered_json starved = nlohmann::ordered_json::array();
  for (const auto& [stage, pct] : r.starved_pct)
    starved.push_back({{"stage", stage}, {"pct", pct}});
  return {{"cores", r.model_cores},
          {"other_cores_busy", r.other_cores_busy ? nlohmann::ordered_json(*r.other_cores_busy)
                                                  : nlohmann::ordered_json(nullptr)},
          {"process_cores_busy", r.process_cores_busy},
          {"bounds", bounds},
          {"close_call", close},
          {"starved", starved},
          {"if_free", if_free_json}};
}

}  // namespace

nlohmann::ordered_json BottleneckReport::ToJson() const {
  nlohmann::ordered_json j;
  j["schema"] = kReportSchema;
  SLUICE_JSON_SET_FIELDS(j, *this, device, is_cuda, on_device, cores, train_seconds, samples, steps,
                         measured_samples_per_s, predicted_samples_per_s,
                         capacity_limit_samples_per_s, cpu_limit_samples_per_s, cpu_threads_busy,
                         cpu_saturated, input_bound_pct, host_wait_pct, compute_host_pct);
  auto number_or_null = [](const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  j["launch_gated_pct"] = launch_gated_pct;
  j["copy_hidden_pct"] = number_or_null(copy_hidden_pct);
  j["copy_startup_pct"] = number_or_null(copy_startup_pct);
  j["epoch_split"] = epoch_split ? nlohmann::ordered_json(*epoch_split) : nlohmann::ordered_json();
  // Communication-bound names the exchange, which has no row in the stage table.
  j["verdict"] = {{"class", VerdictClassName(verdict)},
                  {"limiting_stage", verdict == VerdictClass::kCommunicationBound
                                         ? nlohmann::ordered_json("exchange")
                                         : nlohmann::ordered_json(limiting_stage)},
                  {"sentence", sentence}};
  nlohmann::ordered_json advice_json = nlohmann::ordered_json::array();
  for (const Advice& a : advice) {
    advice_json.push_back(
        {{"setting", AdviceFlag(a.setting)},
         {"value", a.value},
         {"text", AdviceText(a, consumer)},
         {"why", a.why},
         {"kind", IsDataChange(a.setting) ? "data" : "setting"},
         {"predicted_speedup", a.predicted_speedup > 0 ? nlohmann::ordered_json(a.predicted_speedup)
                                                       : nlohmann::ordered_json()}});
  }
  j["verdict"]["advice"] = advice_json;
  j["stages"] = stages;
  j["model"] = ModelJson(*this);
  SLUICE_JSON_SET_FIELDS(j["pipeline"], pipeline, pool_buffers, frame_budget, ring_depth, threads,
                         batches_delivered, samples_delivered, skipped_frames, skipped_records,
                         trace_dropped, pool_bytes, frame_buffer_bytes, stored_buffer_bytes);
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
  nlohmann::ordered_json& f = m["formula_bytes"];
  SLUICE_JSON_SET_FIELDS(f, memory_formula, parameters, gradients, optimizer_state, activations);
  f["total"] = memory_formula.total();
  nlohmann::ordered_json host;
  host["baseline_rss_bytes"] = host_memory.baseline_rss;
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  for (const HostMemoryLine& l : host_memory.lines) {
    lines.push_back({{"name", l.name}, {"bytes", l.bytes}});
  }
  host["lines"] = lines;
  host["accounted_bytes"] = host_memory.baseline_rss + host_memory.accounted();
  host["peak_rss_bytes"] = host_memory.peak_rss;
  host["unaccounted_bytes"] = host_memory.unaccounted();
  m["host"] = host;
  j["memory"] = m;
  j["ceilings"] = ceilings ? ceilings->ToJson() : nlohmann::ordered_json(nullptr);
  if (network) {  // remote datasets only: a local run's JSON is unchanged
    const NetworkRead& n = *network;
    nlohmann::ordered_json w;
    SLUICE_JSON_SET_FIELDS(w, n, requests, retries, throttled, server_errors, connection_errors,
                           bytes, max_in_flight, mean_in_flight, receiving_fraction, latency_p50_ns,
                           latency_p99_ns, cache_hits, cache_misses, cache_hit_bytes, cache_on,
                           cache_writes_off);
    w["read_concurrency"] = read_concurrency;
    w["read_concurrency_tuned"] = read_concurrency_tuned;
    j["network"] = w;
  }
  if (exchange) {  // data-parallel runs only: a single process's JSON is unchanged
    j["exchange"] = *exchange;
    j["ranks"] = ranks;
  }
  j["notes"] = notes;
  return j;
}

}  // namespace sluice
