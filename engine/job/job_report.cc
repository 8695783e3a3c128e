#include "engine/job/job_report.h"

#include <unistd.h>

#include "common/limits.h"
#include "common/status_macros.h"
#include "report/decide/decide.h"
#include "report/render/trace_writer.h"

namespace sluice {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// The report's collectives: every rank calls this, in this order, after training and before
// rank 0 prints (a rank that skipped it would leave the others waiting).
absl::Status GatherWorld(dist::Communicator* world, const TrainJobResult& result,
                         bool gather_traces, AllReduceCeiling* exchange_ceiling, JobReport* out) {
  const dist::ExchangeStats& x = result.run.exchange;
  ASSIGN_OR_RETURN(*exchange_ceiling,
                   MeasureAllReduceCeiling(world, x.steps > 0 ? x.bytes / x.steps : 0));
  const BottleneckReport own = AnalyzeRun(result.run, nullptr, UsableCores());
  const RankSummary mine = SummarizeRank(result.run, own, HostName());
  ASSIGN_OR_RETURN(std::vector<std::string> all, world->AllGather(nlohmann::json(mine).dump()));
  ASSIGN_OR_RETURN(out->ranks, ParseRankSummaries(all));
  if (gather_traces) {
    ASSIGN_OR_RETURN(std::vector<std::string> traces,
                     world->AllGather(BuildChromeTrace(result.run).dump()));
    if (world->rank() == 0) {
      for (const std::string& t : traces) out->traces.push_back(nlohmann::json::parse(t));
    }
  }
  return absl::OkStatus();
}

// The frames one process decodes for this run: every frame once per epoch. Exact only for
// whole epochs from the start, with every sample trained and no frame skipped; otherwise
// unknown (nullopt).
std::optional<uint64_t> FramesOneProcess(Env* env, const TrainJobOptions& o,
                                         const TrainJobResult& r,
                                         const std::vector<RankSummary>& ranks) {
  if (r.resumed || r.train.interrupted || o.pipeline.order.drop_last) return std::nullopt;
  for (const RankSummary& s : ranks) {
    if (s.skipped_frames > 0) return std::nullopt;
  }
  auto dataset = Dataset::Open(env, r.train_manifest);
  if (!dataset.ok()) return std::nullopt;
  uint64_t frames = 0;
  for (const ShardEntry& e : (*dataset)->manifest().shards) frames += e.frame_count;
  return frames * r.train.epochs.size();
}

}  // namespace

std::optional<Ceilings> LoadJobCeilings(Env* env, const TrainJobOptions& options,
                                        const TrainJobResult& result,
                                        const JobReportSettings& settings, std::string* why) {
  if (!settings.ceilings) return std::nullopt;
  auto dataset = Dataset::Open(env, result.train_manifest);
  if (!dataset.ok()) return std::nullopt;
  CeilingOptions c = CeilingOptionsFor(options);
  c.refresh = settings.refresh_ceilings;
  // After a stop the report comes at once: cached ceilings or none (measuring the compute
  // ceiling takes the modelled time of several steps, minutes on a slow simulated device).
  const bool stopped = result.train.interrupted ||
                       (options.stop_requested != nullptr && options.stop_requested->load());
  if (stopped) {
    c.refresh = false;
    c.cached_only = true;
  }
  auto ceilings = Ceilings::LoadOrMeasure(env, **dataset, c);
  if (!ceilings.ok()) {
    *why = stopped ? std::string("the run was stopped (a later run measures them)")
                   : std::string(ceilings.status().message());
    return std::nullopt;
  }
  return *std::move(ceilings);
}

absl::StatusOr<JobReport> ReportJob(Env* env, const TrainJobOptions& options,
                                    const TrainJobResult& result,
                                    const JobReportSettings& settings) {
  JobReport out;
  dist::Communicator* world = options.comm;
  const bool distributed = world != nullptr && world->is_distributed();
  AllReduceCeiling exchange_ceiling;
  if (distributed) {
    RETURN_IF_ERROR(GatherWorld(world, result, settings.gather_traces, &exchange_ceiling, &out));
  }
  if (world != nullptr && world->rank() != 0) return out;
  std::optional<Ceilings> ceilings =
      LoadJobCeilings(env, options, result, settings, &out.ceilings_note);
  out.report = AnalyzeRun(result.run, ceilings ? &*ceilings : nullptr, UsableCores());
  if (distributed) {
    AddWorldFigures(out.ranks, exchange_ceiling, FramesOneProcess(env, options, result, out.ranks),
                    &out.report);
    ApplyVerdict(Decide({.analysis = &out.report, .run = &result.run}), &out.report);
  }
  return out;
}

absl::Status WriteJobTrace(Env* env, const std::string& path, const TrainJobResult& result,
                           const JobReport& report) {
  if (report.traces.empty()) return WriteChromeTrace(env, path, result.run);
  // One process per rank; one host shares one steady clock, so the ranks line up in time.
  bool one_host = true;
  for (const RankSummary& r : report.ranks) one_host &= r.hostname == report.ranks[0].hostname;
  return WriteFileAtomically(env, path, MergeRankTraces(report.traces, one_host).dump() + "\n");
}

}  // namespace sluice
