// sluice-shard's flags, declared for the files of its commands: tools/sluice_shard.cc defines
// them all (so --helpfull lists them under that file) beside the command table that says which
// command reads which. Also the two checks of a flag's value the commands share; their errors are
// kInvalidArgument, a usage error (exit code 2), naming the command and the flag.
#ifndef SLUICE_TOOLS_SLUICE_SHARD_FLAGS_H_
#define SLUICE_TOOLS_SLUICE_SHARD_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/statusor.h"

ABSL_DECLARE_FLAG(std::string, images);
ABSL_DECLARE_FLAG(std::string, labels);
ABSL_DECLARE_FLAG(std::string, layout);
ABSL_DECLARE_FLAG(std::string, cifar10);
ABSL_DECLARE_FLAG(std::string, image_folder);
ABSL_DECLARE_FLAG(std::string, image_list);
ABSL_DECLARE_FLAG(int64_t, frame_bytes);
ABSL_DECLARE_FLAG(std::string, codec);
ABSL_DECLARE_FLAG(bool, skip_bad_images);
ABSL_DECLARE_FLAG(std::string, verify_images);
ABSL_DECLARE_FLAG(int64_t, max_image_pixels);
ABSL_DECLARE_FLAG(double, holdout_fraction);
ABSL_DECLARE_FLAG(std::string, holdout_split);
ABSL_DECLARE_FLAG(int64_t, num_classes);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::string, split);
ABSL_DECLARE_FLAG(int64_t, records_per_shard);
ABSL_DECLARE_FLAG(int64_t, records_per_frame);
ABSL_DECLARE_FLAG(int64_t, zstd_level);
ABSL_DECLARE_FLAG(int64_t, threads);
ABSL_DECLARE_FLAG(bool, quiet);

namespace sluice {

// The value of a string flag the command needs: "<command>: --<name> is required" when empty.
absl::StatusOr<std::string> RequiredFlag(const std::string& command,
                                         const absl::Flag<std::string>& flag, const char* name);

// The value of an integer flag, which must lie in [lo, hi]; the error names the value and the
// range.
absl::StatusOr<int64_t> IntInRange(const std::string& command, const absl::Flag<int64_t>& flag,
                                   const char* name, int64_t lo, int64_t hi);

}  // namespace sluice

#endif  // SLUICE_TOOLS_SLUICE_SHARD_FLAGS_H_
