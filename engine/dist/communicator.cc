#include "engine/dist/communicator.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::dist {
namespace {

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string description() const override { return "single process"; }
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(double*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(int64_t*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceMax(double*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int root) override {
    if (root != 0)
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " of 1"));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override {
    return std::vector<std::string>{mine};
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Duplicate() override {
    return SingleProcessCommunicator();
  }
  [[noreturn]] void Abort(int exit_code) override { std::_Exit(exit_code); }
};

std::atomic<double> g_collective_timeout_s{kDefaultCollectiveTimeoutSeconds};
std::atomic<const char*> g_program_name{"sluice"};
std::atomic<int64_t> g_training_step{-1};

const char* Get(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

void SetCollectiveTimeoutSeconds(double seconds) { g_collective_timeout_s.store(seconds); }
double CollectiveTimeoutSeconds() { return g_collective_timeout_s.load(); }
void SetWatchdogProgramName(const char* name) { g_program_name.store(name); }
const char* WatchdogProgramName() { return g_program_name.load(); }
void NoteTrainingStep(int64_t optimizer_steps) {
  g_training_step.store(optimizer_steps, std::memory_order_relaxed);
}
int64_t NotedTrainingStep() { return g_training_step.load(std::memory_order_relaxed); }

std::string DetectLauncher() {
  if (Get("OMPI_COMM_WORLD_SIZE") != nullptr) return "mpirun";
  // Slurm: srun starts a job step of SLURM_STEP_NUM_TASKS tasks; its PMI/PMIx plugin lets
  // MPI_Init find the others. (SLURM_NTASKS alone is also set in a batch script, which is one
  // process however many tasks the allocation has.)
  int ntasks = 0;
  if (const char* n = Get("SLURM_STEP_NUM_TASKS"); n != nullptr && Get("SLURM_PROCID") != nullptr &&
                                                   absl::SimpleAtoi(n, &ntasks) && ntasks > 1) {
    return "srun";
  }
  if (Get("PMIX_RANK") != nullptr || Get("PMI_RANK") != nullptr) return "mpirun";
  return "";
}

std::unique_ptr<Communicator> SingleProcessCommunicator() {
  return std::make_unique<SingleProcess>();
}

absl::Status CheckSameOnAllRanks(Communicator* comm, absl::string_view what,
                                 const std::vector<std::pair<std::string, std::string>>& mine) {
  if (!comm->is_distributed()) return absl::OkStatus();
  std::string text;
  for (const auto& [k, v] : mine) absl::StrAppend(&text, k, "=", v, "\n");
  auto all = comm->AllGather(text);
  if (!all.ok()) return all.status();
  auto parse = [](const std::string& s) {
    std::vector<std::pair<std::string, std::string>> kv;
    size_t begin = 0;
    while (begin < s.size()) {
      size_t end = s.find('\n', begin);
      if (end == std::string::npos) end = s.size();
      const std::string line = s.substr(begin, end - begin);
      const size_t eq = line.find('=');
      kv.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
      begin = end + 1;
    }
    return kv;
  };
  const auto root = parse((*all)[0]);
  std::vector<std::string> diffs;
  for (int r = 1; r < comm->size(); ++r) {
    if ((*all)[r] == (*all)[0]) continue;
    const auto other = parse((*all)[r]);
    bool named = false;
    for (const auto& [k, v] : other) {
      std::string v0 = "(unset)";
      for (const auto& [k0, x] : root) {
        if (k0 == k) v0 = x;
      }
      if (v0 != v) {
        diffs.push_back(absl::StrCat("rank ", r, " has ", k, "=", v, ", rank 0 has ", v0));
        named = true;
      }
    }
    for (const auto& [k0, v0] : root) {
      bool present = false;
      for (const auto& [k, v] : other) present |= k == k0;
      if (!present) {
        diffs.push_back(absl::StrCat("rank ", r, " lacks ", k0, " (rank 0 has ", v0, ")"));
        named = true;
      }
    }
    if (!named) diffs.push_back(absl::StrCat("rank ", r, " lists them in another order"));
    if (diffs.size() > 16) break;
  }
  if (diffs.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the ", comm->size(), " ranks disagree on ", what, ": ", absl::StrJoin(diffs, "; "),
      " (start every rank with the same flags and dataset)"));
}

}  // namespace sluice::dist
