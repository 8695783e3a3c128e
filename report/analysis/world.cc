// The data-parallel figures of the bottleneck report (docs/bottleneck.md, "Data-parallel
// runs"): a rank's summary for rank 0, and on rank 0 the exchange section, the ranks table and
// the straggler. The job's verdict is Decide's (report/decide/world_verdict.cc).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/analysis/bottleneck_report.h"
#include "report/decide/thresholds.h"
#include "report/format.h"

namespace sluice {
namespace {

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// Time a rank spent in the exchange's collectives: the gradient all-reduces and the sample
// count. A rank that arrives early waits in them (mostly in the count, the step's first
// collective) for the last one.
int64_t InExchangeNs(const RankSummary& r) { return r.exchange_busy_ns + r.exchange_count_ns; }

}  // namespace

RankSummary SummarizeRank(const RunRecord& run, const BottleneckReport& own,
                          const std::string& hostname) {
  RankSummary s;
  s.rank = run.rank;
  s.hostname = hostname;
  s.train_seconds = own.train_seconds;
  s.samples = own.samples;
  s.samples_per_s = own.measured_samples_per_s;
  s.verdict_class = VerdictClassName(own.verdict);
  s.limiting_stage = own.limiting_stage;
  s.sentence = own.sentence;
  s.input_bound_pct = own.input_bound_pct;
  s.exchange_steps = run.exchange.steps;
  s.exchange_bytes = run.exchange.bytes;
  s.exchange_busy_ns = run.exchange.busy_ns;
  s.exchange_count_ns = run.exchange.count_ns;
  s.exchange_pct = Pct(static_cast<double>(InExchangeNs(s)), own.train_seconds * 1e9);
  for (const StageRow& row : own.stages) s.stage_busy_pct.by_stage[row.stage] = row.busy_pct;
  s.frames_decoded = run.pipeline.frames_decoded;
  s.skipped_frames = run.pipeline.skipped_frames;
  return s;
}

void AddWorldFigures(const std::vector<RankSummary>& ranks, const AllReduceCeiling& ceiling,
                     std::optional<uint64_t> frames_one_process, BottleneckReport* rep) {
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
  x.communication_bound_pct = verdict_thresholds::kCommunicationBoundPct;
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
      FormatRate(job_rate), x.world_size, x.train_pct));
}

}  // namespace sluice
