#include "python/src/fork_guard.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace sluice::python {
namespace {

std::atomic<pid_t> threads_started_in{0};  // 0: no threads started yet

}  // namespace

void NoteThreadsStarted() {
  pid_t none = 0;
  threads_started_in.compare_exchange_strong(none, getpid());
}

void SkipTbbTeardownInForkChildren() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    ::on_exit(
        [](int status, void*) {
          if (ForkedAfterThreadsStarted()) ::_exit(status);
        },
        nullptr);
  });
}

bool ForkedAfterThreadsStarted() {
  const pid_t started = threads_started_in.load();
  return started != 0 && started != getpid();
}

void CheckNotForked(absl::string_view what) {
  if (!ForkedAfterThreadsStarted()) return;
  // std::runtime_error: pybind11 raises it as RuntimeError with this message.
  throw std::runtime_error(absl::StrCat(
      what, ": sluice started its threads in process ", threads_started_in.load(),
      ", and this is process ", getpid(),
      ", a fork() child of it: threads do not survive fork(), so sluice cannot run here; "
      "create loaders only in processes that did not inherit started ones (fork before the "
      "first iteration or write_dataset), or use multiprocessing's 'spawn' or 'forkserver' "
      "start method"));
}

}  // namespace sluice::python
