// InitWorld for builds without MPI: a single process, and a clear error under a launcher.
#include "absl/strings/str_cat.h"
#include "engine/dist/communicator.h"

namespace sluice::dist {

bool BuiltWithMpi() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> InitWorld(int*, char***) {
  const std::string launcher = DetectLauncher();
  if (!launcher.empty()) {
    return absl::UnavailableError(absl::StrCat("started by ", launcher,
                                               " but this sluice was built without MPI (install "
                                               "libopenmpi-dev and rebuild)"));
  }
  return SingleProcessCommunicator();
}

}  // namespace sluice::dist
