// sluice-allreduce-bench: the MPI all-reduce that carries the gradients of CPU and sim
// data-parallel runs (engine/dist), timed at gradient sizes from 4 KiB to the 784-4096-4096-10
// MLP's 80 MB. Run it under the launcher, one rank per process:
//
//   mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none
//       -np 2 build/bench/sluice-allreduce-bench
//
// Prints, per size, the median of the timed calls (after warm-ups), the algorithm bandwidth
// (bytes / time) and the bus bandwidth (x 2(N-1)/N, NCCL's convention: what each link carries
// in a ring), and a least-squares fit of time = alpha + bytes / beta over the sizes up to
// 1 MiB, which docs/scaling.md uses to check its model against this machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/dist/communicator.h"

int main(int argc, char** argv) {
  auto world = sluice::dist::InitWorld(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "sluice-allreduce-bench: %s\n",
                 std::string(world.status().message()).c_str());
    return 1;
  }
  sluice::dist::Communicator* comm = world->get();
  const int n = comm->size();
  const std::vector<size_t> sizes = {4 << 10, 64 << 10, 407080,  1 << 20,
                                     4 << 20, 16 << 20, 80150568};
  if (comm->rank() == 0) {
    std::printf("sluice-allreduce-bench: %d ranks, %s\n", n, comm->description().c_str());
    std::printf("%12s %8s %12s %12s %12s\n", "bytes", "calls", "median_us", "algbw_GB/s",
                "busbw_GB/s");
  }
  std::vector<double> xs, ys;
  for (size_t bytes : sizes) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const int calls = bytes >= (16u << 20) ? 10 : 50;
    for (int w = 0; w < 3; ++w) (void)comm->AllReduceSum(data.data(), data.size());
    std::vector<double> us;
    for (int c = 0; c < calls; ++c) {
      (void)comm->Barrier();
      const auto t0 = std::chrono::steady_clock::now();
      if (!comm->AllReduceSum(data.data(), data.size()).ok()) return 1;
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    // The slowest rank's time is the collective's time.
    for (double& u : us) (void)comm->AllReduceMax(&u, 1);
    std::sort(us.begin(), us.end());
    const double median = us[us.size() / 2];
    const double algbw = bytes / (median * 1e3);
    if (bytes <= (1u << 20)) {  // the fit covers the small-message regime (the reference MLP)
      xs.push_back(static_cast<double>(bytes));
      ys.push_back(median);
    }
    if (comm->rank() == 0) {
      std::printf("%12zu %8d %12.1f %12.2f %12.2f\n", bytes, calls, median, algbw,
                  algbw * 2.0 * (n - 1) / n);
    }
  }
  // time_us = alpha + bytes / (beta * 1e3)  (beta in GB/s)
  const double m = static_cast<double>(xs.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    sx += xs[i];
    sy += ys[i];
    sxx += xs[i] * xs[i];
    sxy += xs[i] * ys[i];
  }
  const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  const double alpha = (sy - slope * sx) / m;
  if (comm->rank() == 0) {
    std::printf("fit (sizes <= 1 MiB): time = %.1f us + bytes / %.2f GB/s\n", alpha,
                1.0 / (slope * 1e3));
  }
  world->reset();
  return 0;
}
