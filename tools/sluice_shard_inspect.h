// `sluice-shard inspect`: a shard file's layout, or a split's manifest, with the label
// histogram and, for encoded images, the distribution of sample sizes.
#ifndef SLUICE_TOOLS_SLUICE_SHARD_INSPECT_H_
#define SLUICE_TOOLS_SLUICE_SHARD_INSPECT_H_

#include <string>

#include "absl/status/status.h"
#include "common/env.h"

namespace sluice {

// A shard file, a manifest, or a dataset directory: every split in it, in name order.
absl::Status RunInspect(Env* env, const std::string& path);

}  // namespace sluice

#endif  // SLUICE_TOOLS_SLUICE_SHARD_INSPECT_H_
