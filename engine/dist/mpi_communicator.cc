// The MPI world: Open MPI (Debian's openmpi-bin / libopenmpi-dev) or any MPI-3 library.
#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "engine/dist/communicator.h"
#include "engine/dist/internal/collective_watchdog.h"

namespace sluice::dist {
namespace {

using dist_internal::CollectiveKind;
using dist_internal::CollectiveWatchdog;

// Communicators made by Duplicate() so far: every rank makes them in the same order (it is a
// collective), so the count names the same communicator on every rank.
std::atomic<int64_t> g_duplicates{0};

absl::Status MpiError(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return absl::InternalError(
      absl::StrCat(call, " failed: ", len > 0 ? std::string(text, len) : "unknown MPI error"));
}

#define SLUICE_MPI_CHECK(call)                                               \
  do {                                                                       \
    const int sluice_mpi_rc = (call);                                        \
    if (sluice_mpi_rc != MPI_SUCCESS) return MpiError(#call, sluice_mpi_rc); \
  } while (0)

std::string LibraryName() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) return "MPI";
  std::string v(version, len);
  const size_t cut = v.find_first_of(",\n");
  return cut == std::string::npos ? v : v.substr(0, cut);
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed on destruction); `finalize`: this object initialized MPI
  // and finalizes it when destroyed (the world communicator).
  // `watchdog` bounds every collective's wait (the world's; null: none); a finalizing
  // communicator owns it and stops it before MPI_Finalize.
  MpiCommunicator(MPI_Comm comm, int rank, int size, int local_rank, int local_size,
                  std::string description, bool finalize, CollectiveWatchdog* watchdog,
                  int64_t comm_index)
      : comm_(comm),
        rank_(rank),
        size_(size),
        local_rank_(local_rank),
        local_size_(local_size),
        description_(std::move(description)),
        finalize_(finalize),
        watchdog_(watchdog),
        comm_index_(comm_index) {}
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    if (finalize_) {
      delete watchdog_;
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string description() const override { return description_; }

  absl::Status AllReduceSum(float* data, size_t count) override {
    return Reduce(data, count, MPI_FLOAT, MPI_SUM);
  }
  absl::Status AllReduceSum(double* data, size_t count) override {
    return Reduce(data, count, MPI_DOUBLE, MPI_SUM);
  }
  absl::Status AllReduceSum(int64_t* data, size_t count) override {
    return Reduce(data, count, MPI_INT64_T, MPI_SUM);
  }
  absl::Status AllReduceMax(double* data, size_t count) override {
    return Reduce(data, count, MPI_DOUBLE, MPI_MAX);
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    CollectiveWatchdog::Scope watched(watchdog_, CollectiveKind::kBroadcast, comm_index_, ++calls_);
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {  // MPI counts are int
      const int n = static_cast<int>(std::min<size_t>(bytes, 1 << 30));
      SLUICE_MPI_CHECK(MPI_Bcast(p, n, MPI_BYTE, root, comm_));
      p += n;
      bytes -= n;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override {
    CollectiveWatchdog::Scope watched(watchdog_, CollectiveKind::kAllGather, comm_index_, ++calls_);
    int64_t my_len = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lens(size_);
    SLUICE_MPI_CHECK(MPI_Allgather(&my_len, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, comm_));
    std::vector<int> counts(size_), displs(size_);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      if (lens[r] > (1 << 30) || total > (1 << 30)) {
        return absl::InvalidArgumentError("AllGather: more than 1 GiB");
      }
      counts[r] = static_cast<int>(lens[r]);
      displs[r] = static_cast<int>(total);
      total += lens[r];
    }
    std::string all(static_cast<size_t>(total), '\0');
    SLUICE_MPI_CHECK(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR,
                                    all.data(), counts.data(), displs.data(), MPI_CHAR, comm_));
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], counts[r]);
    return out;
  }

  absl::Status Barrier() override {
    CollectiveWatchdog::Scope watched(watchdog_, CollectiveKind::kBarrier, comm_index_, ++calls_);
    SLUICE_MPI_CHECK(MPI_Barrier(comm_));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Duplicate() override {
    MPI_Comm dup;
    {
      CollectiveWatchdog::Scope watched(watchdog_, CollectiveKind::kDuplicate, comm_index_,
                                        ++calls_);
      SLUICE_MPI_CHECK(MPI_Comm_dup(comm_, &dup));
    }
    SLUICE_MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    return std::unique_ptr<Communicator>(
        new MpiCommunicator(dup, rank_, size_, local_rank_, local_size_, description_,
                            /*finalize=*/false, watchdog_, ++g_duplicates));
  }

  [[noreturn]] void Abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; in case it does
  }

 private:
  absl::Status Reduce(void* data, size_t count, MPI_Datatype type, MPI_Op op) {
    CollectiveWatchdog::Scope watched(watchdog_, CollectiveKind::kAllReduce, comm_index_, ++calls_);
    auto* p = static_cast<char*>(data);
    int type_size = 0;
    SLUICE_MPI_CHECK(MPI_Type_size(type, &type_size));
    while (count > 0) {
      const int n = static_cast<int>(std::min<size_t>(count, 1 << 28));
      SLUICE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, n, type, op, comm_));
      p += size_t{static_cast<size_t>(n)} * type_size;
      count -= n;
    }
    return absl::OkStatus();
  }

  MPI_Comm comm_;
  const int rank_, size_, local_rank_, local_size_;
  const std::string description_;
  const bool finalize_;
  CollectiveWatchdog* const watchdog_;
  const int64_t comm_index_;  // 0: the world; duplicates numbered as made
  int64_t calls_ = 0;         // collectives called on this communicator (one thread at a time)
};

absl::StatusOr<std::unique_ptr<Communicator>> InitMpiWorld(int* argc, char*** argv,
                                                           const std::string& launcher) {
  int initialized = 0;
  SLUICE_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) {
    return absl::FailedPreconditionError("MPI is already initialized (InitWorld called twice?)");
  }
  // A rank shares its cores with its own pipeline threads: a collective that waits should
  // yield the core to them rather than spin (Open MPI's default spins). A user's setting wins.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  SLUICE_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  SLUICE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    return absl::UnavailableError(
        "the MPI library does not provide MPI_THREAD_MULTIPLE (the gradient exchange runs on "
        "the compute stream's thread while the training thread polls); use an MPI built with "
        "thread support");
  }
  int rank = 0, size = 0;
  SLUICE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  SLUICE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (const char* n = std::getenv("SLURM_STEP_NUM_TASKS");
      launcher == "srun" && n != nullptr && std::atoi(n) != size) {
    MPI_Finalize();
    return absl::UnavailableError(absl::StrCat(
        "srun started ", n, " tasks but MPI sees a world of ", size,
        ": MPI did not find Slurm's process manager (run srun --mpi=pmix, or use mpirun)"));
  }
  MPI_Comm node;
  SLUICE_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int local_rank = 0, local_size = 1;
  SLUICE_MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  SLUICE_MPI_CHECK(MPI_Comm_size(node, &local_size));
  MPI_Comm_free(&node);
  MPI_Comm watch;
  SLUICE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &watch));
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(MPI_COMM_WORLD, rank, size, local_rank, local_size,
                          absl::StrCat(launcher, " (", LibraryName(), ")"), /*finalize=*/true,
                          new CollectiveWatchdog(watch, rank, size), /*comm_index=*/0));
}

}  // namespace

bool BuiltWithMpi() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> InitWorld(int* argc, char*** argv) {
  const std::string launcher = DetectLauncher();
  if (launcher.empty()) return SingleProcessCommunicator();
  return InitMpiWorld(argc, argv, launcher);
}

}  // namespace sluice::dist
