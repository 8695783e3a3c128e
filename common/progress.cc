#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {
std::atomic<bool> g_enabled{true};
}

void Progress::SetEnabled(bool enabled) { g_enabled = enabled; }

Progress::Progress(std::string label, uint64_t total, std::string unit,
                   std::chrono::seconds plain_interval)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      plain_interval_(plain_interval),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      tty_(::isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { Finish(); }

void Progress::Add(uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  auto now = std::chrono::steady_clock::now();
  auto interval = tty_ ? std::chrono::milliseconds(100)
                       : std::chrono::duration_cast<std::chrono::milliseconds>(plain_interval_);
  if (now - last_draw_ < interval) return;  // racy read is fine: only throttles drawing
  absl::MutexLock l(&mu_);
  if (finished_ || now - last_draw_ < interval) return;
  last_draw_ = now;
  Draw(false);
}

void Progress::SetDetail(std::string detail) {
  absl::MutexLock l(&mu_);
  detail_ = std::move(detail);
}

void Progress::Finish() {
  absl::MutexLock l(&mu_);
  if (finished_) return;
  finished_ = true;
  Draw(true);
}

void Progress::Draw(bool final) {
  if (!g_enabled) return;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  uint64_t done = done_.load(std::memory_order_relaxed);
  double rate = secs > 0 ? done / secs : 0.0;
  std::string line;
  if (total_ > 0) {
    line = absl::StrFormat("%s: %d/%d %s (%.0f%%), %.0f %s/s, %.1fs", label_, done, total_, unit_,
                           100.0 * done / total_, rate, unit_, secs);
  } else {
    line = absl::StrFormat("%s: %d %s, %.0f %s/s, %.1fs", label_, done, unit_, rate, unit_, secs);
  }
  if (!detail_.empty()) absl::StrAppend(&line, ", ", detail_);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else if (!final || done > 0) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace sluice
