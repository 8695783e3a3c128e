// BottleneckReport::ToText: the table, the measured and predicted rates, the pools, the
// data-parallel exchange and ranks, the verdict, the notes and the memory figures
// (docs/bottleneck.md explains each).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline/transforms/transform_chain.h"
#include "report/analysis/bottleneck_report.h"
#include "report/format.h"
#include "report/stages.h"

namespace sluice {

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

// Under the row of a part of a stage (decode): where its time sits, so the rows still add up.
std::string FormatPartLine(const BottleneckReport& rep, const StageRow& part) {
  const Stage whole_stage = *PartOf(part.stage);
  const StageRow& whole = rep.row(whole_stage);
  const StageInfo& info = *FindReportStage(part.stage);
  // Crop-window decoding decodes part of each image: the part against the whole.
  const double per_item = part.items > 0 ? 1e3 * static_cast<double>(part.items) : 1.0;
  const std::string out_bytes =
      part.stored_bytes > part.bytes
          ? absl::StrFormat(
                "%.0f KB of pixels decoded of the whole image's %.0f KB on average (%.0f%%)",
                part.bytes / per_item, part.stored_bytes / per_item,
                100.0 * part.bytes / part.stored_bytes)
          : absl::StrFormat("%.0f KB out on average", part.bytes / per_item);
  std::string out = absl::StrFormat(
      "  %s runs inside %s, on its %d %s: %.1f%% of their time on %d %ss (%.1f us each, "
      "%s); %s's %.1f%% busy includes it",
      StageName(part.stage), StageName(whole_stage), part.concurrency,
      part.concurrency == 1 ? "thread" : "threads", part.busy_pct, part.items, info.unit,
      part.items > 0 ? part.busy_ns / 1e3 / part.items : 0.0, out_bytes, StageName(whole_stage),
      whole.busy_pct);
  if (part.ceiling_samples_per_s) {
    absl::StrAppendFormat(&out, "; ceiling: %s per core alone",
                          FormatRate(*part.ceiling_samples_per_s /
                                     std::min(part.concurrency, std::max(1, rep.cores))));
  }
  return out + "\n";
}

// The preprocess row's split between the transform chain's ops ("  chain: 61%
// RandomCrop(...), ..., 30% outside the chain ..."); "" without ops.
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
// Under the table: each row's item latency, one line per row that has one ("item latency:" and
// "  read        p50 1.20 ms, p99 3.40 ms, max 5.10 ms per frame").
std::string FormatLatencies(const BottleneckReport& rep) {
  std::string out;
  for (const StageRow& r : rep.stages) {
    const std::string l = FormatItemLatency(r);
    if (r.present && !l.empty()) absl::StrAppendFormat(&out, "  %-11s %s\n", StageName(r.stage), l);
  }
  return out.empty() ? out : absl::StrCat("item latency (each item's wall time):\n", out);
}

// The network section of a remote dataset's report; "" for local files.
std::string FormatNetwork(const BottleneckReport& rep) {
  if (!rep.network) return "";
  const NetworkRead& n = *rep.network;
  std::string out = absl::StrFormat(
      "network: %.1f MB fetched from the object store in %d requests (%s); request latency p50 "
      "%.1f ms, p99 %.1f ms; %.1f in flight on average, at most "
      "%d (read concurrency %d%s)%s\n",
      static_cast<double>(n.bytes) / 1e6, n.requests,
      rep.consumer == Consumer::kPython ? "this pass"
      : rep.network_includes_evaluation ? "training and evaluation"
                                        : "training",
      static_cast<double>(n.latency_p50_ns) / 1e6, static_cast<double>(n.latency_p99_ns) / 1e6,
      n.mean_in_flight, n.max_in_flight, rep.read_concurrency,
      rep.read_concurrency_tuned ? ", tuned" : "",
      n.requests > 0 ? absl::StrFormat("; a response was arriving %.0f%% of the time one was in "
                                       "flight",
                                       100.0 * n.receiving_fraction)
                     : std::string());
  absl::StrAppendFormat(&out,
                        "  retries    %d (%d throttled: 429/503, %d other 5xx, %d connection "
                        "errors)\n",
                        n.retries, n.throttled, n.server_errors, n.connection_errors);
  const uint64_t lookups = n.cache_hits + n.cache_misses;
  if (!n.cache_on) {
    absl::StrAppend(&out, "  cache      off (--cache-bytes 0)\n");
  } else {
    absl::StrAppendFormat(
        &out, "  cache      %d of %d frames read from the local cache (%.0f%%)%s\n", n.cache_hits,
        lookups,
        lookups > 0 ? 100.0 * static_cast<double>(n.cache_hits) / static_cast<double>(lookups)
                    : 0.0,
        n.cache_writes_off.empty() ? ""
                                   : absl::StrCat("; it stopped writing: ", n.cache_writes_off));
  }
  return out;
}

// The exchange section and the ranks table of a data-parallel report; "" in a single process.
std::string FormatWorld(const BottleneckReport& rep) {
  if (!rep.exchange) return "";
  const ExchangeFigures& x = *rep.exchange;
  std::string out = absl::StrFormat(
      "exchange: %d ranks (%d on rank 0's host), %d bytes of gradients per step, %d steps\n",
      x.world_size, x.ceiling.local_size, x.bytes_per_step, x.steps);
  absl::StrAppendFormat(
      &out,
      "  time       rank 0: %s all-reduce + %.1f us sample count per step = %.1f%% of "
      "training time\n",
      x.time_per_step_us ? absl::StrFormat("%.1f us", *x.time_per_step_us)
                         : std::string("not measured (NCCL on its stream)"),
      x.count_time_per_step_us, x.train_pct);
  absl::StrAppendFormat(&out,
                        "  own cost   rank %d (the straggler, it waits for no one): %.1f%% of "
                        "training time (communication-bound above %.0f%%)\n",
                        x.straggler.rank, x.pure_pct, x.communication_bound_pct);
  absl::StrAppendFormat(
      &out,
      "  bandwidth  %s algorithm bandwidth (bytes / the straggler's all-reduce time); "
      "ceiling %s%s\n",
      x.achieved_gb_per_s ? absl::StrFormat("%.2f GB/s", *x.achieved_gb_per_s)
                          : std::string("not measured"),
      x.ceiling.measured ? absl::StrFormat("%.2f GB/s (median %.1f us for %d bytes)",
                                           x.ceiling.gb_per_s, x.ceiling.median_us, x.ceiling.bytes)
                         : x.ceiling.note,
      x.pct_of_ceiling ? absl::StrFormat(", %.0f%% of it", *x.pct_of_ceiling) : "");
  absl::StrAppendFormat(
      &out, "  hidden     %s behind compute: %s\n",
      x.hidden_pct ? absl::StrFormat("%.0f%%", *x.hidden_pct) : std::string("not measured"),
      x.hidden_note);
  absl::StrAppend(&out, "  straggler  ", StragglerClause(x.straggler), "\n");
  if (x.duplicated_decode_factor) {
    absl::StrAppendFormat(&out,
                          "  decoding   duplicated-decode factor %.2f: %d frames decoded by all "
                          "ranks / %d that one process decodes\n",
                          *x.duplicated_decode_factor, x.frames_decoded, *x.frames_one_process);
  } else {
    absl::StrAppendFormat(&out,
                          "  decoding   %d frames decoded by all ranks; duplicated-decode factor "
                          "unknown (resumed, interrupted, --drop-last or skipped frames)\n",
                          x.frames_decoded);
  }
  absl::StrAppendFormat(&out, "%4s %-12s %16s %-19s %-11s %6s %6s %6s %6s %6s %6s %6s %7s\n",
                        "rank", "host", "rate", "verdict", "limit", "input%", "exch%", "read%",
                        "decmp%", "prep%", "h2d%", "comp%", "frames");
  for (const RankSummary& r : rep.ranks) {
    absl::StrAppendFormat(
        &out, "%4d %-12s %16s %-19s %-11s %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %7d\n", r.rank,
        r.hostname.substr(0, 12), FormatRate(r.samples_per_s), r.verdict_class,
        std::string(StageName(r.limiting_stage)), r.input_bound_pct, r.exchange_pct,
        r.stage_busy_pct.of(Stage::kRead), r.stage_busy_pct.of(Stage::kDecompress),
        r.stage_busy_pct.of(Stage::kPreprocess), r.stage_busy_pct.of(Stage::kH2D),
        r.stage_busy_pct.of(Stage::kCompute), r.frames_decoded);
  }
  return out;
}

}  // namespace

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
    // A part of a stage (decode inside preprocess): no waits, queue or wait share of its own.
    const bool decode = PartOf(r.stage).has_value();
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
    if (decode) absl::StrAppend(&out, FormatPartLine(*this, r));
    absl::StrAppend(&out, FormatChainShares(r));
  }
  absl::StrAppend(&out, FormatLatencies(*this));
  absl::StrAppendFormat(
      &out,
      "measured %s; predicted %s, bound by %s (slowest capacity %s; CPU limit %s "
      "on %d cores; CPU stages, compute included, used %.2f cores)\n",
      FormatRate(measured_samples_per_s), FormatRate(predicted_samples_per_s),
      model.bounds.empty() ? std::string("nothing measured") : BoundPhrase(model.binding, cores),
      FormatRate(capacity_limit_samples_per_s), FormatRate(cpu_limit_samples_per_s), cores,
      cpu_threads_busy);
  absl::StrAppendFormat(&out, "pool %d pinned buffers, frame budget %d, device ring %d\n",
                        pipeline.pool_buffers, pipeline.frame_budget, pipeline.ring_depth);
  absl::StrAppend(&out, FormatCopyHidden(*this));
  const StageRow& pinned = row(Stage::kPinnedWait);
  if (pinned.present && pinned.items > 0) {
    absl::StrAppendFormat(&out,
                          "pinned buffers: %.1f batches waited for one on average (a batch "
                          "waited %.1f%% of the time); at most %d of %d in use; it held the "
                          "run back only as far as compute waited (%.1f%% of training time)\n",
                          pinned.batches_waiting_avg, pinned.busy_pct, pinned.queue_high_water,
                          pipeline.pool_buffers, input_bound_pct);
  }
  absl::StrAppend(&out, FormatNetwork(*this));  // remote datasets only
  absl::StrAppend(&out, FormatWorld(*this));    // data parallel only
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

}  // namespace sluice
