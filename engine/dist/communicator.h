// Communicator: the processes of a data-parallel job and the collectives between them
// (docs/distributed.md). MPI launches the job and carries the CPU collectives; NCCL (on CUDA
// backends) carries the gradients between GPUs, bootstrapped through this communicator.
//
// A process started without an MPI launcher is a world of one (rank 0 of 1): every collective
// is then a no-op, and nothing of MPI is initialized. A process started by `mpirun` (Open MPI:
// OMPI_COMM_WORLD_SIZE) or by `srun` (SLURM_STEP_NUM_TASKS > 1, set for its job step; a batch
// script is one process however many tasks its allocation has) is a rank of the MPI world.
// Each collective must be called by every rank of the communicator in the same order.
//
// Errors: kUnavailable when the environment names an MPI launch but sluice was built without
// MPI, or MPI_Init fails; kInternal naming the MPI call and its error string when a collective
// fails (a peer that died usually makes the launcher kill this process first).
// Thread safety: MPI is initialized with MPI_THREAD_MULTIPLE; one Communicator is used by one
// thread at a time. Use Duplicate() to give another thread (e.g. a device's compute stream,
// which runs the gradient exchange) a communicator of its own, so that two threads' collectives
// never interleave on one communicator.
#ifndef SLUICE_ENGINE_DIST_COMMUNICATOR_H_
#define SLUICE_ENGINE_DIST_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::dist {

// What a backend's gradient exchange did so far (zero in a single process).
struct ExchangeStats {
  int64_t steps = 0;
  int64_t bytes = 0;     // gradient bytes this rank reduced (summed over steps)
  int64_t busy_ns = 0;   // time in the exchange calls (the host-side wait on CPU and sim)
  int64_t count_ns = 0;  // time agreeing on each global batch's sample count
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's index among the ranks on its machine, and their number (the device a rank
  // uses is its local rank).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // "single process", "mpirun (Open MPI 4.1.4)", ...
  virtual std::string description() const = 0;

  // In-place sums over all ranks. Every rank gets the same result: the reduction order is fixed
  // by the library for a given world size and count, so reruns are bitwise identical.
  virtual absl::Status AllReduceSum(float* data, size_t count) = 0;
  virtual absl::Status AllReduceSum(double* data, size_t count) = 0;
  virtual absl::Status AllReduceSum(int64_t* data, size_t count) = 0;
  // In-place maximum over all ranks.
  virtual absl::Status AllReduceMax(double* data, size_t count) = 0;
  // Rank `root`'s `bytes` bytes at `data`, on every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's string, indexed by rank (the strings may differ in length).
  virtual absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) = 0;
  virtual absl::Status Barrier() = 0;

  // A communicator over the same ranks whose collectives never match this one's.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Duplicate() = 0;

  // Ends every rank of the job now with `exit_code` (MPI_Abort under MPI; _Exit alone).
  [[noreturn]] virtual void Abort(int exit_code) = 0;

  bool is_distributed() const { return size() > 1; }
};

// The launcher the environment names: "mpirun", "srun", or "" (none: a single process).
std::string DetectLauncher();

// A world of one: every collective returns at once with the data unchanged.
std::unique_ptr<Communicator> SingleProcessCommunicator();

// The job's world communicator: SingleProcessCommunicator() when DetectLauncher() is empty,
// else MPI's world (MPI_Init_thread on first call; MPI_Finalize at exit). `argc`/`argv` may be
// null.
absl::StatusOr<std::unique_ptr<Communicator>> InitWorld(int* argc, char*** argv);

// The watchdog on collectives (MPI only; docs/distributed.md, "Watchdog"): a rank that waits
// longer than this in one collective ends the job with one line naming the ranks that did not
// arrive and the step. 0 turns it off. Process-wide; set it before InitWorld.
inline constexpr double kDefaultCollectiveTimeoutSeconds = 300;
void SetCollectiveTimeoutSeconds(double seconds);
double CollectiveTimeoutSeconds();
// The program named at the start of the watchdog's line ("sluice-train").
void SetWatchdogProgramName(const char* name);
const char* WatchdogProgramName();
// The training steps this process has completed (-1: none yet), shown by the watchdog. The
// trainer notes each step; thread-safe.
void NoteTrainingStep(int64_t optimizer_steps);
int64_t NotedTrainingStep();

// Whether sluice was built with MPI.
bool BuiltWithMpi();

// Gathers `mine` from every rank and returns an error when any rank's differs from rank 0's:
// kFailedPrecondition "ranks disagree on <what>: rank R has X, rank 0 has Y" listing each
// differing key. `mine` is a list of "key=value" lines (the run's options and dataset identity).
absl::Status CheckSameOnAllRanks(Communicator* comm, absl::string_view what,
                                 const std::vector<std::pair<std::string, std::string>>& mine);

}  // namespace sluice::dist

#endif  // SLUICE_ENGINE_DIST_COMMUNICATOR_H_
