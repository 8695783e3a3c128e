// Fork safety: the pipeline's TBB workers and threads do not survive fork(). A child of a
// process that started them would wait forever on threads that are not there (continuing an
// iterator, starting a pass, building a new Loader: oneTBB's global scheduler cannot be used
// again in the child). So the first start of threads records this process's id, and every
// entry point that would use them checks it and raises instead of hanging (docs/python.md,
// "Fork").
//
// In a child, objects inherited from the parent (a Loader, its pass, batches) are never torn
// down: their destructors would join or signal threads that are not there. They are leaked.
// Thread safety: thread-safe (an atomic).
#ifndef SLUICE_PYTHON_SRC_FORK_GUARD_H_
#define SLUICE_PYTHON_SRC_FORK_GUARD_H_

#include <sys/types.h>

#include "absl/strings/string_view.h"

namespace sluice::python {

// Call before starting TBB or pipeline threads: the first call records this process.
void NoteThreadsStarted();

// Call after TBB or pipeline threads have started (once is enough; later calls do nothing).
// Registers an exit handler that, in a fork() child, ends the process at once with the status
// it is exiting with. Python has finalized and flushed by then; what it skips is oneTBB's own
// exit handler, which in a child waits forever for the parent's worker threads. Exit handlers
// run in the reverse order of registration, and oneTBB's is registered when it starts, so ours,
// registered after, runs first.
void SkipTbbTeardownInForkChildren();

// True in a fork() child of the process that started the threads.
bool ForkedAfterThreadsStarted();

// Raises RuntimeError naming `what`, both processes and what to do instead when this process
// is a fork() child of the one that started the threads. Call with the GIL held.
void CheckNotForked(absl::string_view what);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_FORK_GUARD_H_
