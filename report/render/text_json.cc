// BottleneckReport::ToText and ToJson. The JSON fields and units are documented in
// docs/report-schema.md; keep the two in step.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_fields.h"
#include "pipeline/transforms/transform_chain.h"
#include "report/analysis/bottleneck_report.h"
#include "report/internal/report_internal.h"

namespace sluice {
// A stage is written as its name ("read", ..., "compute").
template <typename BasicJsonType>
void to_json(BasicJsonType& j, const Stage& s) {
  j = std::string(StageName(s));
}

SLUICE_DEFINE_JSON_FIELDS(ChainOpShare, op, share_pct)
SLUICE_DEFINE_JSON_FIELDS(EpochSplit, first_epoch, later_epochs, first_samples_per_s,
                          later_samples_per_s, first_seconds, later_seconds, first_read_seconds,
                          later_read_seconds, first_read_mb_per_s, later_read_mb_per_s, differ,
                          ran_ahead, cold)

// The rows of "stages", each key the field's name (docs/report-schema.md, "stages").
SLUICE_DEFINE_JSON_FIELDS(StageRow, stage, present, cpu_work, concurrency, items, samples, bytes,
                          items_per_s, samples_per_s, busy_ns, busy_pct, wait_input_pct,
                          wait_output_pct, queue_high_water, capacity_samples_per_s,
                          cpu_ns_per_sample, cores_busy, ceiling_samples_per_s, pct_of_ceiling,
                          attributed_wait_pct, batches_waiting_avg, ops, outside_chain_pct)

using report_internal::FormatRate;

namespace {
// "copies (h2d) hidden behind compute: 93% of copy time", near the h2d row.
std::string FormatCopyHidden(const BottleneckReport& rep) {
  if (rep.copy_hidden_pct) {
    return absl::StrFormat(
        "copies (h2d) hidden behind compute: %.0f%% of copy time (%.0f%% ran before an epoch's "
        "first "
        "step: nothing to hide it behind)\n",
        *rep.copy_hidden_pct, rep.copy_startup_pct.value_or(0));
  }
  if (rep.row(Stage::kH2D).present) {
    return "copies (h2d) hidden behind compute: not measured (the steps were not timed on the "
           "device)\n";
  }
  return "copies (h2d) hidden behind compute: not applicable (no copies: batches stay in host "
         "memory)\n";
}
}  // namespace

namespace report_internal {
// Under the decode row: where its time sits, so the rows still add up.
std::string FormatDecodeLine(const BottleneckReport& rep, const StageRow& decode) {
  const StageRow& pre = rep.row(Stage::kPreprocess);
  std::string out = absl::StrFormat(
      "  decode runs inside preprocess, on its %d threads: %.1f%% of their time decoded %d "
      "images (%.1f us each, %.0f KB decoded on average); preprocess's %.1f%% busy includes it",
      decode.concurrency, decode.busy_pct, decode.items,
      decode.items > 0 ? decode.busy_ns / 1e3 / decode.items : 0.0,
      decode.items > 0 ? decode.bytes / 1e3 / decode.items : 0.0, pre.busy_pct);
  if (decode.ceiling_samples_per_s) {
    absl::StrAppendFormat(&out, "; ceiling: the bare decoder, %s per core",
                          FormatRate(*decode.ceiling_samples_per_s /
                                     std::min(decode.concurrency, std::max(1, rep.cores))));
  }
  return out + "\n";
}

std::string FormatChainShares(const StageRow& row) {
  if (!row.ops) return "";
  std::string out = "  chain: ";
  for (const ChainOpShare& o : *row.ops)
    absl::StrAppendFormat(&out, "%.0f%% %s, ", o.share_pct, o.op);
  absl::StrAppendFormat(&out,
                        "%.0f%% outside the chain (gather, conversion) of preprocess busy time; "
                        "sampled 1 in %d samples\n",
                        row.outside_chain_pct.value_or(0), TransformChain::kTimingStride);
  return out;
}
}  // namespace report_internal

std::string BottleneckReport::ToText() const {
  std::string out =
      absl::StrFormat("bottleneck report: %s, %d cores, %.3f s training, %d samples in %d steps\n",
                      device, cores, train_seconds, samples, steps);
  absl::StrAppendFormat(&out, "%-11s %4s %9s %18s %6s %7s %8s %5s %18s %6s %6s\n", "stage", "conc",
                        "items", "rate", "busy%", "wait-in", "wait-out", "q-hw", "capacity",
                        "ceil%", "wait%");
  for (const StageRow& r : stages) {
    if (!r.present) {
      absl::StrAppendFormat(&out, "%-11s %s\n", StageName(r.stage), "-- (not in this run)");
      continue;
    }
    const bool pinned = r.stage == Stage::kPinnedWait;
    // Decode is part of preprocess: no waits, queue or wait share of its own ("-").
    const bool decode = r.stage == Stage::kDecode;
    const auto pct = [decode](double v) {
      return decode ? std::string("-") : absl::StrFormat("%.1f", v);
    };
    absl::StrAppendFormat(&out, "%-11s %4s %9d %18s %6.1f %7s %8s %5s %18s %6s %6s\n",
                          StageName(r.stage), pinned ? "-" : absl::StrCat(r.concurrency), r.items,
                          pinned ? "-" : FormatRate(r.samples_per_s), r.busy_pct,
                          pct(r.wait_input_pct), pct(r.wait_output_pct),
                          decode ? "-" : absl::StrCat(r.queue_high_water),
                          r.capacity_samples_per_s ? FormatRate(*r.capacity_samples_per_s) : "-",
                          r.pct_of_ceiling ? absl::StrFormat("%.0f", *r.pct_of_ceiling) : "-",
                          pct(r.attributed_wait_pct));
    if (decode) absl::StrAppend(&out, report_internal::FormatDecodeLine(*this, r));
    absl::StrAppend(&out, report_internal::FormatChainShares(r));
  }
  absl::StrAppendFormat(&out,
                        "measured %s; predicted %s (slowest capacity %s; CPU limit %s on %d "
                        "cores; CPU stages, compute included, kept %.2f threads busy)\n",
                        FormatRate(measured_samples_per_s), FormatRate(predicted_samples_per_s),
                        FormatRate(capacity_limit_samples_per_s),
                        FormatRate(cpu_limit_samples_per_s), cores, cpu_threads_busy);
  absl::StrAppendFormat(&out, "pool %d pinned buffers, frame budget %d, device ring %d\n",
                        pipeline.pool_buffers, pipeline.frame_budget, pipeline.ring_depth);
  absl::StrAppend(&out, FormatCopyHidden(*this));
  const StageRow& pinned = row(Stage::kPinnedWait);
  if (pinned.present && pinned.items > 0) {
    absl::StrAppendFormat(&out,
                          "pinned buffers: %.1f batches waited for one on average (a batch "
                          "waited %.1f%% of the time); at most %d of %d in use\n",
                          pinned.batches_waiting_avg, pinned.busy_pct, pinned.queue_high_water,
                          pipeline.pool_buffers);
  }
  absl::StrAppend(&out, report_internal::FormatWorld(*this));  // data parallel only
  absl::StrAppend(&out, "verdict: ", sentence, "\n");
  for (const std::string& n : notes) absl::StrAppend(&out, "note: ", n, "\n");
  if (memory.total_peak > 0 || memory.total_current > 0) {
    absl::StrAppend(&out, FormatMemoryReport(memory, memory_formula));
  } else {
    // The Python consumer trains with its own framework: no sluice backend held the model.
    absl::StrAppend(&out,
                    "memory: no sluice backend in this run (the model's memory is not "
                    "measured here)\n");
  }
  if (host_memory.peak_rss > 0) absl::StrAppend(&out, FormatHostMemoryReport(host_memory));
  return out;
}

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
    advice_json.push_back({{"setting", AdviceFlag(a.setting)},
                           {"value", a.value},
                           {"text", AdviceText(a, consumer)},
                           {"why", a.why}});
  }
  j["verdict"]["advice"] = advice_json;
  j["stages"] = stages;
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
  if (exchange) {  // data-parallel runs only: a single process's JSON is unchanged
    j["exchange"] = *exchange;
    j["ranks"] = ranks;
  }
  j["notes"] = notes;
  return j;
}

}  // namespace sluice
