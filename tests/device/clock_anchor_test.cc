// The host-side arithmetic that places device timing events on the host clock
// (device/clock_anchor.h): rounding of the device's float milliseconds within the anchor's
// maximum age, and the anchor window's midpoint.
#include "device/clock_anchor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "gtest/gtest.h"

namespace sluice::device {
namespace {

// What a device reports for `ns` between two events: float milliseconds.
float DeviceElapsedMs(int64_t ns) { return static_cast<float>(static_cast<double>(ns) / 1e6); }

// The worst placement error for events up to `age_ns` after their anchor.
int64_t WorstPlacementErrorNs(int64_t age_ns) {
  int64_t worst = 0;
  for (int i = 1; i <= 10'000; ++i) {
    const int64_t true_offset = age_ns / 10'000 * i + 7 * i;  // not round numbers
    const int64_t placed = HostNsFromAnchor(1'000'000'000, DeviceElapsedMs(true_offset));
    worst = std::max(worst, std::abs(placed - 1'000'000'000 - true_offset));
  }
  return worst;
}

TEST(ClockAnchorTest, EventsWithinTheAnchorsMaximumAgeArePlacedWithinAMicrosecond) {
  EXPECT_LE(WorstPlacementErrorNs(kMaxClockAnchorAgeNs), 1'000);
}

// Why the anchor is re-taken: with one anchor for a 10-minute run, the float's rounding alone
// misplaces late events by tens of microseconds, a sizable share of a 80 us step.
TEST(ClockAnchorTest, OneAnchorForTenMinutesMisplacesEventsByTensOfMicroseconds) {
  EXPECT_GE(WorstPlacementErrorNs(600'000'000'000), 10'000);
}

TEST(ClockAnchorTest, EventsBeforeTheAnchorArePlacedBeforeIt) {
  EXPECT_EQ(HostNsFromAnchor(5'000'000, DeviceElapsedMs(-2'000'000)), 3'000'000);
}

TEST(ClockAnchorTest, AnAnchorOlderThanItsMaximumAgeIsRetaken) {
  EXPECT_FALSE(ClockAnchorTooOld(0, kMaxClockAnchorAgeNs));
  EXPECT_TRUE(ClockAnchorTooOld(0, kMaxClockAnchorAgeNs + 1));
}

// The anchor completed somewhere inside its window: the midpoint is off by at most half of it,
// where the time its completion was seen (the old anchor's time) is late by the whole window.
TEST(ClockAnchorTest, AnchorTimeIsTheWindowsMidpoint) {
  const AnchorWindow w{.before_ns = 1'000, .after_ns = 41'000};
  EXPECT_EQ(w.width(), 40'000);
  EXPECT_EQ(w.host_ns(), 21'000);
}

// A step of 80 us late in a 10-minute run: the difference of its two placed times is off by
// the float's rounding at that age; the elapsed time of its own event pair is not.
TEST(ClockAnchorTest, DurationsComeFromTheirOwnEventPair) {
  int64_t worst_difference = 0, worst_pair = 0;
  for (int64_t start = 599'000'000'000; start < 599'000'000'000 + 100 * 1'234'567;
       start += 1'234'567) {
    const int64_t end = start + 80'000;
    const int64_t by_difference =
        HostNsFromAnchor(0, DeviceElapsedMs(end)) - HostNsFromAnchor(0, DeviceElapsedMs(start));
    worst_difference = std::max(worst_difference, std::abs(by_difference - 80'000));
    worst_pair = std::max(worst_pair, std::abs(NsFromElapsedMs(DeviceElapsedMs(80'000)) - 80'000));
  }
  EXPECT_GE(worst_difference, 10'000);
  EXPECT_LE(worst_pair, 10);
}

}  // namespace
}  // namespace sluice::device
