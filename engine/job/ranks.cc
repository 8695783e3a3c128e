#include "engine/job/ranks.h"

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "report/stages.h"

namespace sluice {

bool IsDistributed(const TrainJobOptions& options) {
  return options.comm != nullptr && options.comm->is_distributed();
}

bool IsRankZero(const TrainJobOptions& options) {
  return options.comm == nullptr || options.comm->rank() == 0;
}

DataParallelSlice SliceOf(const TrainJobOptions& options) {
  if (!IsDistributed(options)) return {};
  return {static_cast<uint32_t>(options.comm->rank()), static_cast<uint32_t>(options.comm->size())};
}

absl::Status CheckRanksAgree(const TrainJobOptions& options, const KeyValues& identity,
                             const Dataset* test) {
  if (!IsDistributed(options)) return absl::OkStatus();
  // The transforms are compared by the chain's canonical identity (RunIdentity's, so two
  // spellings of the same ops agree), named on every rank, "none" without a chain.
  KeyValues same;
  std::string transforms = "none";
  for (const auto& [key, value] : identity) {
    if (key == "transforms") {
      transforms = value;
    } else {
      same.emplace_back(key, value);
    }
  }
  same.emplace_back("--transforms", transforms);
  for (const auto& [key, value] : options.run_config) {
    if (key != "data" && key != "test_data" && key != "cache_dir" && key != "transforms") {
      same.emplace_back(absl::StrCat("--", key), value);
    }
  }
  same.emplace_back("epochs", absl::StrCat(options.epochs));
  same.emplace_back("progress_every_steps", absl::StrCat(options.progress_every_steps));
  same.emplace_back("checkpoint_every", absl::StrCat(options.checkpoint_every));
  same.emplace_back("stop_after_steps", absl::StrCat(options.stop_after_steps));
  same.emplace_back("evaluate", options.evaluate ? "1" : "0");
  same.emplace_back("on_corrupt",
                    options.pipeline.on_corrupt == OnCorrupt::kSkip ? "skip" : "fail");
  same.emplace_back("h2d_format", std::string(H2DFormatName(options.pipeline.format.h2d_format)));
  same.emplace_back("resume", options.resume);
  // Settings that decide whether a rank joins a collective (docs/distributed.md, "Agreement"):
  // a checkpoint checks the corruption budget (an all-reduce) first; --report-every takes the
  // loss (an all-reduce) at its own steps; --trace gathers every rank's trace after training;
  // --what-if=compute skips the step, so its gradient exchange; the budget's verdict ends one
  // rank or all. The paths may differ between machines; whether one is given may not.
  same.emplace_back("--checkpoint-dir", options.checkpoint_dir.empty() ? "none" : "a directory");
  same.emplace_back("--report-every", absl::StrCat(options.report_every_steps));
  same.emplace_back("--trace", options.pipeline.diagnostics.trace_capacity > 0 ? "a file" : "none");
  same.emplace_back("--what-if", options.compute_free ? std::string(StageName(Stage::kCompute))
                                 : options.pipeline.diagnostics.what_if
                                     ? std::string(StageName(*options.pipeline.diagnostics.what_if))
                                     : "none");
  same.emplace_back("--max-corrupt-fraction", absl::StrCat(options.max_corrupt_fraction));
  if (test != nullptr) {
    same.emplace_back("test.manifest_xxh3", ChecksumToHex(Xxh3(test->manifest().ToJson())));
  }
  return dist::CheckSameOnAllRanks(options.comm, "the run's settings", same);
}

}  // namespace sluice
