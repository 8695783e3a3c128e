// The max-corrupt-fraction check shared by sluice-train and sluice.Loader
// (engine/job/corrupt_fraction.h): the limit, and the wording of each.
#include "engine/job/corrupt_fraction.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(CorruptFractionTest, AtOrBelowTheLimitPassesAboveItIsDataLossWordedForEachConsumer) {
  const std::vector<std::string> messages = {"s.shard: frame 2: checksum", "s.shard: frame 5"};
  EXPECT_TRUE(CheckSplitCorruptFraction("train", {"m.json", 0, 0, nullptr}, 0).ok());
  EXPECT_TRUE(CheckSplitCorruptFraction("train", {"m.json", 1, 99, &messages}, 0.01).ok());
  const absl::Status split = CheckSplitCorruptFraction("test", {"m.json", 3, 97, &messages}, 0.01);
  EXPECT_EQ(split.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(split.message(),
            "m.json: 3 of 100 records of the test split read so far were skipped as corrupt "
            "(0.03), above --max-corrupt-fraction=0.01; first: s.shard: frame 2: checksum");
  const absl::Status pass = CheckPassCorruptFraction(4, {"m.json", 1000, 0, nullptr}, 0.5);
  EXPECT_EQ(pass.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(pass.message(),
            "m.json: 1000 of 1000 records read in epoch 4 were skipped as corrupt (1), above "
            "max_corrupt_fraction=0.5; first: (no message)");
  EXPECT_TRUE(CheckPassCorruptFraction(0, {"m.json", 1000, 0, nullptr}, 1.0).ok());
}

}  // namespace
}  // namespace sluice
