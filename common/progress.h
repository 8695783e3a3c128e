// Progress: reports long work as a live line on a terminal (rewritten with \r at most ~10
// times a second) or as periodic plain lines when stderr is not a terminal (logs, CI).
// Thread safe: Update() may be called from any thread.
#ifndef SLUICE_COMMON_PROGRESS_H_
#define SLUICE_COMMON_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"

namespace sluice {

class Progress {
 public:
  // `label` prefixes every line; `total` is the unit count of the whole job (0: unknown).
  // `plain_interval` is the spacing of plain lines when not on a terminal.
  Progress(std::string label, uint64_t total, std::string unit,
           std::chrono::seconds plain_interval = std::chrono::seconds(5));
  ~Progress();

  // Adds `n` finished units and maybe redraws.
  void Add(uint64_t n);
  // Sets a free-form suffix (e.g. "loss 0.41").
  void SetDetail(std::string detail);
  // Prints the final line (once) and ends the live line.
  void Finish();
  // When false, nothing is printed at all (e.g. --quiet).
  static void SetEnabled(bool enabled);

 private:
  void Draw(bool final);

  std::string label_;
  uint64_t total_;
  std::string unit_;
  std::chrono::seconds plain_interval_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  absl::Mutex mu_;
  std::chrono::steady_clock::time_point last_draw_;
  std::string detail_;
  bool tty_;
  bool finished_ = false;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_PROGRESS_H_
