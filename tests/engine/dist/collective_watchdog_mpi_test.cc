// The collective watchdog under `mpirun -np 2` (tests/engine/dist/CMakeLists.txt): each mode
// makes the ranks miss each other, and ctest checks the line the watchdog ends the job with.
//   busy:     rank 1 computes (outside any collective) while rank 0 waits in an all-reduce;
//   mismatch: rank 0 waits in an all-reduce, rank 1 in a barrier.
// The job must end (exit code 1, MPI_Abort) instead of waiting forever; a run that returns
// from main did not detect anything and prints "watchdog did not fire".
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "engine/dist/communicator.h"

int main(int argc, char** argv) {
  using sluice::dist::Communicator;
  if (argc != 2 || (std::strcmp(argv[1], "busy") != 0 && std::strcmp(argv[1], "mismatch") != 0)) {
    std::fprintf(stderr, "usage: collective_watchdog_mpi_test busy|mismatch\n");
    return 2;
  }
  const bool busy = std::strcmp(argv[1], "busy") == 0;
  sluice::dist::SetWatchdogProgramName("watchdog-test");
  sluice::dist::SetCollectiveTimeoutSeconds(2);
  auto world = sluice::dist::InitWorld(&argc, &argv);
  if (!world.ok() || (*world)->size() != 2) {
    std::fprintf(stderr, "needs mpirun -np 2\n");
    return 2;
  }
  Communicator* comm = world->get();
  sluice::dist::NoteTrainingStep(7);
  double x = 1;
  if (comm->rank() == 0) {
    (void)comm->AllReduceSum(&x, 1);
  } else if (busy) {
    std::this_thread::sleep_for(std::chrono::seconds(30));  // longer than timeout and grace
  } else {
    (void)comm->Barrier();
  }
  std::fprintf(stderr, "watchdog did not fire\n");
  return 0;
}
