// The data-parallel part of the bottleneck report: the exchange section, the ranks table, the
// straggler and the communication-bound verdict (docs/bottleneck.md, "Data-parallel runs").
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/analysis/bottleneck_report.h"
#include "report/internal/report_internal.h"

namespace sluice {
namespace report_internal {
namespace {

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// Time a rank spent in the exchange's collectives: the gradient all-reduces and the sample
// count. A rank that arrives early waits in them (mostly in the count, the step's first
// collective) for the last one.
int64_t InExchangeNs(const RankSummary& r) { return r.exchange_busy_ns + r.exchange_count_ns; }

bool IsPipelineStage(const std::string& stage) { return stage != "compute" && !stage.empty(); }

std::string StragglerClause(const Straggler& s) {
  return absl::StrFormat(
      "rank %d is the straggler: its %s limits it (%s); the others wait %.0f%% of the step for it",
      s.rank,
      IsPipelineStage(s.limiting_stage) ? absl::StrCat("input pipeline (", s.limiting_stage, ")")
                                        : s.limiting_stage,
      s.verdict_class, s.others_wait_pct);
}

// Straggler wait below this share of the step leaves rank 0's verdict as the job's.
constexpr double kStragglerWaitPct = 5.0;

}  // namespace

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
        r.hostname.substr(0, 12), FormatRate(r.samples_per_s), r.verdict_class, r.limiting_stage,
        r.input_bound_pct, r.exchange_pct, r.stage_busy_pct.read, r.stage_busy_pct.decompress,
        r.stage_busy_pct.preprocess, r.stage_busy_pct.h2d, r.stage_busy_pct.compute,
        r.frames_decoded);
  }
  return out;
}

}  // namespace report_internal

RankSummary SummarizeRank(const RunRecord& run, const BottleneckReport& own,
                          const std::string& hostname) {
  RankSummary s;
  s.rank = run.rank;
  s.hostname = hostname;
  s.train_seconds = own.train_seconds;
  s.samples = own.samples;
  s.samples_per_s = own.measured_samples_per_s;
  s.verdict_class = VerdictClassName(own.verdict);
  s.limiting_stage = std::string(StageName(own.limiting_stage));
  s.sentence = own.sentence;
  s.input_bound_pct = own.input_bound_pct;
  s.exchange_steps = run.exchange.steps;
  s.exchange_bytes = run.exchange.bytes;
  s.exchange_busy_ns = run.exchange.busy_ns;
  s.exchange_count_ns = run.exchange.count_ns;
  s.exchange_pct = report_internal::Pct(static_cast<double>(report_internal::InExchangeNs(s)),
                                        own.train_seconds * 1e9);
  auto busy = [&own](Stage st) { return own.stages.empty() ? 0.0 : own.row(st).busy_pct; };
  s.stage_busy_pct = {busy(Stage::kRead),       busy(Stage::kDecompress), busy(Stage::kPreprocess),
                      busy(Stage::kPinnedWait), busy(Stage::kH2D),        busy(Stage::kCompute)};
  s.frames_decoded = run.pipeline.frames_decoded;
  s.skipped_frames = run.pipeline.skipped_frames;
  return s;
}

void AddWorldFigures(const std::vector<RankSummary>& ranks, const AllReduceCeiling& ceiling,
                     std::optional<uint64_t> frames_one_process, BottleneckReport* rep) {
  using report_internal::InExchangeNs;
  using report_internal::Pct;
  if (ranks.size() < 2) return;  // a single process: the report stays as it is
  rep->ranks = ranks;
  const RankSummary& me = ranks[0];
  ExchangeFigures x;
  x.world_size = static_cast<int>(ranks.size());
  x.steps = static_cast<uint64_t>(std::max<int64_t>(0, me.exchange_steps));
  x.bytes_per_step = x.steps > 0 ? me.exchange_bytes / static_cast<int64_t>(x.steps) : 0;
  x.busy_ns = me.exchange_busy_ns;
  x.count_ns = me.exchange_count_ns;
  // CUDA: the per-layer NCCL sums run on their own stream during backward and are not timed.
  const bool timed = !rep->is_cuda;
  if (timed && x.steps > 0) x.time_per_step_us = x.busy_ns / 1e3 / x.steps;
  x.count_time_per_step_us = x.steps > 0 ? x.count_ns / 1e3 / x.steps : 0;
  x.train_pct = me.exchange_pct;

  int s = 0;
  for (int r = 1; r < x.world_size; ++r) {
    if (InExchangeNs(ranks[r]) < InExchangeNs(ranks[s])) s = r;
  }
  const RankSummary& slow = ranks[s];
  double wait = 0;
  for (int r = 0; r < x.world_size; ++r) {
    if (r == s) continue;
    wait += Pct(static_cast<double>(InExchangeNs(ranks[r]) - InExchangeNs(slow)),
                ranks[r].train_seconds * 1e9);
  }
  x.straggler = {s, slow.verdict_class, slow.limiting_stage, wait / (x.world_size - 1)};
  x.pure_pct = slow.exchange_pct;
  if (timed && slow.exchange_busy_ns > 0 && slow.exchange_steps > 0) {
    // bytes per ns = GB/s
    x.achieved_gb_per_s = static_cast<double>(x.bytes_per_step) /
                          (static_cast<double>(slow.exchange_busy_ns) / slow.exchange_steps);
  }
  if (timed) {
    x.hidden_pct = 0;
    x.hidden_note = "MPI_Allreduce blocks the step's thread (CPU and sim backends)";
  } else {
    x.hidden_note =
        "not measured: the per-layer NCCL all-reduces overlap backward on their own stream "
        "and are not timed yet";
  }
  x.ceiling = ceiling;
  if (x.achieved_gb_per_s && ceiling.measured && ceiling.gb_per_s > 0) {
    x.pct_of_ceiling = 100.0 * *x.achieved_gb_per_s / ceiling.gb_per_s;
  }
  x.communication_bound_pct = kCommunicationBoundPct;
  for (const RankSummary& r : ranks) x.frames_decoded += r.frames_decoded;
  x.frames_one_process = frames_one_process;
  if (frames_one_process && *frames_one_process > 0) {
    x.duplicated_decode_factor = static_cast<double>(x.frames_decoded) / *frames_one_process;
  }
  rep->exchange = x;

  double job_rate = 0;
  for (const RankSummary& r : ranks) job_rate += r.samples_per_s;
  rep->notes.push_back(absl::StrFormat(
      "data parallel: the table is rank 0's; the job trained %s over %d ranks; compute busy "
      "includes the gradient exchange inside TrainStep (%.1f%% of training time on rank 0)",
      report_internal::FormatRate(job_rate), x.world_size, x.train_pct));

  // The job's verdict.
  const std::string clause = report_internal::StragglerClause(x.straggler);
  if (rep->verdict != VerdictClass::kNoData && x.pure_pct > kCommunicationBoundPct) {
    rep->verdict = VerdictClass::kCommunicationBound;
    rep->limiting_stage = Stage::kCompute;  // written "exchange" (ToJson)
    rep->sentence = absl::StrFormat(
        "communication-bound: the gradient exchange takes %.0f%% of training time even on rank "
        "%d, the straggler, which waits for no one (%d bytes per step%s); give each rank more "
        "samples per step (a larger global --batch-size), run fewer ranks per node, or use NCCL "
        "on GPUs (--device cuda)",
        x.pure_pct, s, x.bytes_per_step,
        x.achieved_gb_per_s
            ? absl::StrFormat(" at %.2f GB/s%s", *x.achieved_gb_per_s,
                              x.pct_of_ceiling ? absl::StrFormat(", %.0f%% of the measured "
                                                                 "all-reduce ceiling",
                                                                 *x.pct_of_ceiling)
                                               : "")
            : "");
    return;
  }
  if (s != 0 && x.straggler.others_wait_pct >= report_internal::kStragglerWaitPct) {
    if (auto v = report_internal::ParseVerdictClass(slow.verdict_class)) rep->verdict = *v;
    if (auto st = ParseStage(slow.limiting_stage); st.ok()) rep->limiting_stage = *st;
    rep->sentence = absl::StrCat(VerdictClassName(rep->verdict), ": ", clause, "; rank ", s,
                                 "'s own report: ", slow.sentence);
    return;
  }
  absl::StrAppend(&rep->sentence, "; ", clause);
}

}  // namespace sluice
