// Placing device timing events on the host's steady clock. A device gives only the time between
// two of its events (CUDA: cudaEventElapsedTime, a float of milliseconds), so an event's host
// time is an anchor event's host time plus the elapsed time from the anchor. The arithmetic
// lives here, free of CUDA, so it is tested on any machine (tests/device/clock_anchor_test.cc).
//
// Two errors, and what bounds them:
// - The float: its 24-bit mantissa rounds `elapsed_ms` to about age x 6e-8, 36 us at 10 minutes.
//   An anchor is therefore never older than kMaxClockAnchorAgeNs when an event is placed
//   (under 1 us of rounding) and is re-taken at least every epoch; a duration is taken from its
//   own pair of events, never as the difference of two placed times.
// - The anchor's own host time: it completes between the host time just before its record and
//   the time its completion was seen (a thread wake-up later). The midpoint of the tightest of
//   a few such windows is used, off by at most half that window's width.
#ifndef SLUICE_DEVICE_CLOCK_ANCHOR_H_
#define SLUICE_DEVICE_CLOCK_ANCHOR_H_

#include <cmath>
#include <cstdint>

namespace sluice::device {

// 10 s: a float of milliseconds resolves 10 000 ms to 0.5 us.
inline constexpr int64_t kMaxClockAnchorAgeNs = 10'000'000'000;

// The host steady-clock window around an anchor event's completion: `before_ns` just before it
// was recorded, `after_ns` once its completion was seen.
struct AnchorWindow {
  int64_t before_ns = 0;
  int64_t after_ns = 0;
  int64_t width() const { return after_ns - before_ns; }
  int64_t host_ns() const { return before_ns + width() / 2; }  // off by at most width / 2
};

// The host time of an event recorded `elapsed_ms` (a device's float milliseconds; negative for
// an event before the anchor) after an anchor placed at `anchor_host_ns`.
inline int64_t HostNsFromAnchor(int64_t anchor_host_ns, float elapsed_ms) {
  return anchor_host_ns + std::llround(static_cast<double>(elapsed_ms) * 1e6);
}

// A device duration in nanoseconds from a device's float milliseconds between two events.
inline int64_t NsFromElapsedMs(float elapsed_ms) {
  return std::llround(static_cast<double>(elapsed_ms) * 1e6);
}

// Whether an anchor placed at `anchor_host_ns` must be re-taken before placing events at `now_ns`.
inline bool ClockAnchorTooOld(int64_t anchor_host_ns, int64_t now_ns) {
  return now_ns - anchor_host_ns > kMaxClockAnchorAgeNs;
}

}  // namespace sluice::device

#endif  // SLUICE_DEVICE_CLOCK_ANCHOR_H_
