// sluice-train's flags (tools/sluice_train.cc defines them all; `--helpfull` lists them).
// The tool reads the few below itself; everything else becomes TrainJobOptions.
#ifndef SLUICE_TOOLS_SLUICE_TRAIN_FLAGS_H_
#define SLUICE_TOOLS_SLUICE_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "engine/job/train_job.h"

ABSL_DECLARE_FLAG(bool, ceilings);
ABSL_DECLARE_FLAG(bool, refresh_ceilings);
ABSL_DECLARE_FLAG(int64_t, progress_every);
ABSL_DECLARE_FLAG(double, collective_timeout_s);
ABSL_DECLARE_FLAG(bool, quiet);
ABSL_DECLARE_FLAG(bool, report);
ABSL_DECLARE_FLAG(std::string, report_json);
ABSL_DECLARE_FLAG(std::string, report_html);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(std::string, what_if);
ABSL_DECLARE_FLAG(bool, check_advice);

namespace sluice {

// The job options the parsed flags describe. kInvalidArgument (a usage error) naming the flag.
absl::StatusOr<TrainJobOptions> OptionsFromFlags();

}  // namespace sluice

#endif  // SLUICE_TOOLS_SLUICE_TRAIN_FLAGS_H_
