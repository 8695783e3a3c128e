#include "engine/model.h"

#include <cmath>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(ModelTest, ParseLayersAcceptsSizesAndRejectsGarbage) {
  auto ok = ParseLayers("784,128,10");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->layers, (std::vector<int>{784, 128, 10}));
  EXPECT_EQ(ok->num_parameters(), 784 * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(ParseLayers("784").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLayers("784,0,10").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLayers("784,x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLayers("").status().code(), absl::StatusCode::kInvalidArgument);
}

// A positive size past int was called "not a positive integer".
TEST(ModelTest, ParseLayersNamesASizeAboveTheMaximumAsSuch) {
  EXPECT_EQ(ParseLayers("784,99999999999,10").status().message(),
            "'99999999999' in '784,99999999999,10' is above the maximum layer size 1073741824");
  EXPECT_EQ(ParseLayers("784,99999999999999999999999,10").status().message(),
            "'99999999999999999999999' in '784,99999999999999999999999,10' is above the maximum "
            "layer size 1073741824");
  EXPECT_EQ(ParseLayers("784,1073741825").status().message(),
            "'1073741825' in '784,1073741825' is above the maximum layer size 1073741824");
  EXPECT_EQ(ParseLayers("784,-5").status().message(),
            "'-5' in '784,-5' is not a positive integer (e.g. 784,128,10)");
  ASSERT_TRUE(ParseLayers("784,1073741824").ok());
}

TEST(ModelTest, InitIsSeededDeterministicAndWithinTorchBounds) {
  ModelConfig config;
  OptimizerConfig opt;
  ModelState a = InitModelState(config, opt, 42), b = InitModelState(config, opt, 42),
             c = InitModelState(config, opt, 43);
  ASSERT_EQ(a.params.size(), 4u);
  EXPECT_EQ(a.params[0].name, "0.weight");
  EXPECT_EQ(a.params[0].shape, (std::vector<int64_t>{128, 784}));
  EXPECT_EQ(a.params[3].name, "2.bias");
  EXPECT_EQ(a.params[0].values, b.params[0].values);
  EXPECT_NE(a.params[0].values, c.params[0].values);
  // Uniform in +-1/sqrt(fan_in): bounded, mean ~0, variance ~bound^2/3.
  const double bound = 1 / std::sqrt(784.0);
  double sum = 0, sq = 0;
  for (float w : a.params[0].values) {
    ASSERT_LE(std::abs(w), bound);
    sum += w;
    sq += w * w;
  }
  const double n = a.params[0].values.size();
  EXPECT_NEAR(sum / n, 0, bound * 0.02);
  EXPECT_NEAR(sq / n, bound * bound / 3, bound * bound * 0.02);
  for (float w : a.params[3].values) EXPECT_LE(std::abs(w), 1 / std::sqrt(128.0));
}

TEST(ModelTest, OptimizerStateSlotsFollowTheOptimizer) {
  OptimizerConfig sgd, momentum, adam;
  momentum.momentum = 0.9f;
  adam.kind = OptimizerKind::kAdamW;
  EXPECT_EQ(sgd.state_slots(), 0);
  EXPECT_EQ(momentum.state_slots(), 1);
  EXPECT_EQ(adam.state_slots(), 2);
  ModelState s = InitModelState(ModelConfig{}, adam, 1);
  ASSERT_EQ(s.opt_state.size(), 8u);
  EXPECT_EQ(s.opt_state[0].name, "0.weight.exp_avg");
  EXPECT_EQ(s.opt_state[4].name, "0.weight.exp_avg_sq");
}

TEST(LearningRateTest, ConstantStepAndCosineWithWarmup) {
  OptimizerConfig c;
  c.lr = 0.1f;
  EXPECT_FLOAT_EQ(LearningRateAt(c, 1000), 0.1f);
  c.schedule = LrSchedule::kStep;
  c.step_size = 10;
  c.gamma = 0.5f;
  EXPECT_FLOAT_EQ(LearningRateAt(c, 9), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 10), 0.05f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 25), 0.025f);
  c.schedule = LrSchedule::kCosine;
  c.warmup_steps = 4;
  c.total_steps = 104;
  EXPECT_FLOAT_EQ(LearningRateAt(c, 0), 0.025f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 3), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 4), 0.1f);
  EXPECT_NEAR(LearningRateAt(c, 54), 0.05f, 1e-7);
  EXPECT_NEAR(LearningRateAt(c, 104), 0.0f, 1e-7);
  EXPECT_NEAR(LearningRateAt(c, 500), 0.0f, 1e-7);
}

}  // namespace
}  // namespace sluice
