#include "engine/dist/internal/collective_watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/dist/communicator.h"

namespace sluice::dist::dist_internal {
namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;
constexpr int kAnswerValues = 5;
// How often the thread looks at the oldest collective and answers queries: a fraction of any
// timeout, and cheap (one MPI_Iprobe).
constexpr auto kPollInterval = std::chrono::milliseconds(100);

std::string StepText(int64_t step) {
  return step < 0 ? "before the first training step" : absl::StrCat("after training step ", step);
}

// The grace for answers: long enough for a busy rank's watchdog thread to wake (it polls every
// 100 ms), short next to the timeout.
double GraceSeconds(double timeout_s) { return std::clamp(timeout_s / 4, 1.0, 5.0); }

}  // namespace

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "an all-reduce";
    case CollectiveKind::kBroadcast:
      return "a broadcast";
    case CollectiveKind::kAllGather:
      return "an all-gather";
    case CollectiveKind::kBarrier:
      return "a barrier";
    case CollectiveKind::kDuplicate:
      return "a communicator duplication";
  }
  return "a collective";
}

CollectiveWatchdog::CollectiveWatchdog(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size), thread_([this] { Loop(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  stop_.store(true);
  thread_.join();
  MPI_Comm_free(&comm_);
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog* watchdog, CollectiveKind kind,
                                 int64_t comm_index, int64_t call)
    : watchdog_(watchdog),
      token_(watchdog != nullptr ? watchdog->Enter(kind, comm_index, call) : 0) {}

CollectiveWatchdog::Scope::~Scope() {
  if (watchdog_ != nullptr) watchdog_->Leave(token_);
}

uint64_t CollectiveWatchdog::Enter(CollectiveKind kind, int64_t comm_index, int64_t call) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t token = next_token_++;
  active_.push_back({token, kind, comm_index, call, Clock::now(), NotedTrainingStep()});
  return token;
}

void CollectiveWatchdog::Leave(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [token](const Active& a) { return a.token == token; }),
                active_.end());
}

bool CollectiveWatchdog::Oldest(Active* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_.empty()) return false;
  *out = *std::min_element(active_.begin(), active_.end(),
                           [](const Active& a, const Active& b) { return a.since < b.since; });
  return true;
}

void CollectiveWatchdog::Loop() {
  while (!stop_.load()) {
    std::this_thread::sleep_for(kPollInterval);
    AnswerQueries();
    const double timeout_s = CollectiveTimeoutSeconds();
    Active oldest;
    if (timeout_s <= 0 || !Oldest(&oldest)) continue;
    const double waited_s = std::chrono::duration<double>(Clock::now() - oldest.since).count();
    if (waited_s > timeout_s) Fire(oldest, waited_s);
  }
}

// A query is answered with {waiting, kind, communicator, call, step}: what this rank is doing.
void CollectiveWatchdog::AnswerQueries() {
  while (true) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_, &pending, &status) != MPI_SUCCESS ||
        !pending) {
      return;
    }
    int64_t ignored = 0;
    MPI_Recv(&ignored, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, comm_, MPI_STATUS_IGNORE);
    Active oldest;
    const bool waiting = Oldest(&oldest);
    if (waiting) {
      sent_.push_back(
          {1, static_cast<int64_t>(oldest.kind), oldest.comm_index, oldest.call, oldest.step});
    } else {
      sent_.push_back({0, 0, 0, 0, NotedTrainingStep()});
    }
    MPI_Request request;
    // Never waited for: the job ends soon after a query. The buffer stays in sent_ until then.
    if (MPI_Isend(sent_.back().data(), kAnswerValues, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag,
                  comm_, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
}

void CollectiveWatchdog::WaitAnswering(double seconds, std::vector<Answer>* answers) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    AnswerQueries();
    int pending = 0;
    MPI_Status status;
    if (answers != nullptr &&
        MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, comm_, &pending, &status) == MPI_SUCCESS &&
        pending) {
      int64_t reply[kAnswerValues] = {0, 0, 0, 0, -1};
      MPI_Recv(reply, kAnswerValues, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_,
               MPI_STATUS_IGNORE);
      Answer& a = (*answers)[status.MPI_SOURCE];
      a.answered = true;
      a.waiting = reply[0] != 0;
      a.kind = static_cast<CollectiveKind>(reply[1]);
      a.comm_index = reply[2];
      a.call = reply[3];
      a.step = reply[4];
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void CollectiveWatchdog::Fire(const Active& mine, double waited_s) {
  const double timeout_s = CollectiveTimeoutSeconds();
  int64_t query = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request request;
    if (MPI_Isend(&query, 1, MPI_INT64_T, r, kQueryTag, comm_, &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);
    }
  }
  std::vector<Answer> answers(size_);
  answers[rank_] = {true, true, mine.kind, mine.comm_index, mine.call, mine.step};
  WaitAnswering(GraceSeconds(timeout_s), &answers);
  std::vector<std::string> absent, elsewhere;
  int first_waiting = rank_;
  for (int r = 0; r < size_; ++r) {
    const Answer& a = answers[r];
    if (!a.answered) {
      absent.push_back(absl::StrCat("rank ", r));
    } else if (!a.waiting) {
      absent.push_back(absl::StrCat("rank ", r, " (busy ", StepText(a.step), ")"));
    } else {
      first_waiting = std::min(first_waiting, r);
      if (a.kind != mine.kind || a.comm_index != mine.comm_index || a.call != mine.call) {
        elsewhere.push_back(absl::StrCat("rank ", r, " in ", CollectiveName(a.kind), " ",
                                         StepText(a.step), " (its collective ", a.call,
                                         " on communicator ", a.comm_index, ", rank ", rank_,
                                         "'s is ", mine.call, " on ", mine.comm_index, ")"));
      }
    }
  }
  // One line for the job: the lowest waiting rank speaks; the others end it only if that
  // rank could not.
  if (first_waiting != rank_) WaitAnswering(2 * GraceSeconds(timeout_s), nullptr);
  std::string line =
      absl::StrFormat("%s: rank %d of %d waited %.0f s in %s %s (--collective-timeout-s=%g): ",
                      WatchdogProgramName(), rank_, size_, waited_s, CollectiveName(mine.kind),
                      StepText(mine.step), timeout_s);
  if (!absent.empty()) {
    absl::StrAppend(&line, absl::StrJoin(absent, ", "),
                    " did not arrive (a rank that does not answer is stopped, hung or gone)");
  } else if (!elsewhere.empty()) {
    absl::StrAppend(&line,
                    "the ranks wait in different collectives: ", absl::StrJoin(elsewhere, ", "),
                    " (do the ranks run the same flags?)");
  } else {
    absl::StrAppend(&line, "every rank answered from this collective, which has not completed");
  }
  absl::StrAppend(&line, "; ending the job\n");
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace sluice::dist::dist_internal
