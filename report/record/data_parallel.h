// The data-parallel part of the bottleneck report (docs/bottleneck.md, "Data-parallel runs"):
// what each rank sends rank 0, the all-reduce ceiling, and the exchange figures.
//
//   // every rank, in this order (each call is a collective):
//   AllReduceCeiling c = *MeasureAllReduceCeiling(world, run.exchange.bytes / steps);
//   RankSummary mine = SummarizeRank(run, AnalyzeRun(run, nullptr, cores));  // bottleneck_report.h
//   std::vector<std::string> all = *world->AllGather(nlohmann::json(mine).dump());
//   // rank 0: parse with ParseRankSummaries, then AddWorldFigures(...) (bottleneck_report.h)
//
// Errors: MeasureAllReduceCeiling returns the communicator's errors; ParseRankSummaries
// returns kDataLoss naming the rank whose summary does not parse.
// Thread safety: plain values; MeasureAllReduceCeiling uses `comm` on the calling thread.
#ifndef SLUICE_REPORT_RECORD_DATA_PARALLEL_H_
#define SLUICE_REPORT_RECORD_DATA_PARALLEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json_fields.h"
#include "engine/dist/communicator.h"
#include "nlohmann/json.hpp"
#include "pipeline/stage_stats.h"
#include "report/stages.h"

namespace sluice {

// A stage is written as its name ("read", ..., "compute"); an unknown name does not parse.
template <typename BasicJsonType>
void to_json(BasicJsonType& j, const Stage& s) {
  j = std::string(StageName(s));
}
template <typename BasicJsonType>
void from_json(const BasicJsonType& j, Stage& s) {
  const absl::StatusOr<Stage> stage = ParseStage(j.template get<std::string>());
  if (!stage.ok()) {
    throw BasicJsonType::other_error::create(501, std::string(stage.status().message()), &j);
  }
  s = *stage;
}

// Busy % of each report row on one rank (StageRow::busy_pct), by stage. Its JSON is an object
// keyed by the stages' names, in flow order; an unknown name does not parse.
struct StageBusyPct {
  std::map<Stage, double> by_stage;
  double of(Stage s) const {
    const auto it = by_stage.find(s);
    return it == by_stage.end() ? 0.0 : it->second;
  }
};
template <typename BasicJsonType>
void to_json(BasicJsonType& j, const StageBusyPct& b) {
  j = BasicJsonType::object();
  for (const auto& [stage, pct] : b.by_stage) j[std::string(StageName(stage))] = pct;
}
template <typename BasicJsonType>
void from_json(const BasicJsonType& j, StageBusyPct& b) {
  b.by_stage.clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const absl::StatusOr<Stage> stage = ParseStage(it.key());
    if (!stage.ok()) {
      throw BasicJsonType::other_error::create(501, std::string(stage.status().message()), &j);
    }
    b.by_stage[*stage] = it.value().template get<double>();
  }
}

// One rank's figures, gathered on rank 0 as JSON (the report's "ranks" array).
struct RankSummary {
  int rank = 0;
  std::string hostname;
  double train_seconds = 0;
  uint64_t samples = 0;
  double samples_per_s = 0;
  std::string verdict_class;  // this rank's own verdict (VerdictClassName)
  Stage limiting_stage = Stage::kCompute;
  std::string sentence;  // this rank's own verdict sentence
  double input_bound_pct = 0;
  int64_t exchange_steps = 0;
  int64_t exchange_bytes = 0;
  int64_t exchange_busy_ns = 0;   // in the gradient all-reduces (ExchangeStats::busy_ns)
  int64_t exchange_count_ns = 0;  // agreeing on each global batch's sample count
  double exchange_pct = 0;        // (busy + count) / training time
  StageBusyPct stage_busy_pct;
  uint64_t frames_decoded = 0;  // PipelineStats::frames_decoded
  uint64_t skipped_frames = 0;  // corrupt frames skipped in the train split
};

// The ceiling of the exchange: the median time of `repetitions` all-reduces (float sums) of
// `bytes`, after `warmups`, every rank calling together; each timed call starts after a
// barrier, so a late rank is not counted. Bandwidth is algorithm bandwidth: bytes / time.
struct AllReduceCeiling {
  bool measured = false;
  int world_size = 1;
  int local_size = 1;  // ranks on rank 0's machine
  int64_t bytes = 0;
  int warmups = 0;
  int repetitions = 0;
  double median_us = 0;  // the slowest rank's median
  double gb_per_s = 0;   // bytes / median (1 GB = 1e9 bytes)
  std::string note;      // how it was measured, or `not measured: ...`
};

// Every rank must call it, with the same `bytes` (the largest is used). Not cached: it costs a
// few milliseconds, and the figure depends on where the ranks run now.
absl::StatusOr<AllReduceCeiling> MeasureAllReduceCeiling(dist::Communicator* comm, int64_t bytes,
                                                         int warmups = 3, int repetitions = 20);

// The straggler of a synchronous data-parallel run: the rank that spent the least time in the
// exchange (every other rank waited there for it).
struct Straggler {
  int rank = 0;
  std::string verdict_class;               // its own verdict
  Stage limiting_stage = Stage::kCompute;  // its own limiting stage
  // Mean over the other ranks of (their exchange time - the straggler's) / their training time.
  double others_wait_pct = 0;
};

// The report's "exchange" section (rank 0's figures unless a field says otherwise).
struct ExchangeFigures {
  int world_size = 1;
  uint64_t steps = 0;
  int64_t bytes_per_step = 0;
  int64_t busy_ns = 0;
  int64_t count_ns = 0;
  std::optional<double> time_per_step_us;  // busy / steps; null where not timed (CUDA)
  double count_time_per_step_us = 0;
  double train_pct = 0;                     // (busy + count) / training time
  double pure_pct = 0;                      // the straggler's (busy + count) / its training time
  std::optional<double> achieved_gb_per_s;  // bytes per step / the straggler's busy per step
  std::optional<double> hidden_pct;         // behind compute: 0 on CPU and sim; null on CUDA
  std::string hidden_note;
  AllReduceCeiling ceiling;
  std::optional<double> pct_of_ceiling;  // achieved / ceiling
  double communication_bound_pct = 0;    // the verdict's threshold on pure_pct
  Straggler straggler;
  uint64_t frames_decoded = 0;  // summed over ranks
  std::optional<uint64_t> frames_one_process;
  std::optional<double> duplicated_decode_factor;
};

// JSON of each, keys in field order (docs/report-schema.md, "exchange" and "ranks").
SLUICE_DEFINE_JSON_FIELDS(RankSummary, rank, hostname, train_seconds, samples, samples_per_s,
                          verdict_class, limiting_stage, sentence, input_bound_pct, exchange_steps,
                          exchange_bytes, exchange_busy_ns, exchange_count_ns, exchange_pct,
                          stage_busy_pct, frames_decoded, skipped_frames)
SLUICE_DEFINE_JSON_FIELDS(AllReduceCeiling, measured, world_size, local_size, bytes, warmups,
                          repetitions, median_us, gb_per_s, note)
SLUICE_DEFINE_JSON_FIELDS(Straggler, rank, verdict_class, limiting_stage, others_wait_pct)
SLUICE_DEFINE_JSON_FIELDS(ExchangeFigures, world_size, steps, bytes_per_step, busy_ns, count_ns,
                          time_per_step_us, count_time_per_step_us, train_pct, pure_pct,
                          achieved_gb_per_s, hidden_pct, hidden_note, ceiling, pct_of_ceiling,
                          communication_bound_pct, straggler, frames_decoded, frames_one_process,
                          duplicated_decode_factor)

// Parses the gathered summaries (index = rank).
absl::StatusOr<std::vector<RankSummary>> ParseRankSummaries(const std::vector<std::string>& all);

}  // namespace sluice

#endif  // SLUICE_REPORT_RECORD_DATA_PARALLEL_H_
