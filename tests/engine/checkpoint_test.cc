#include "engine/checkpoint.h"

#include "common/coding.h"
#include "common/testing/fault_injection_env.h"
#include "common/testing/mem_env.h"
#include "engine/checkpoint_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

Checkpoint SmallCheckpoint(const OptimizerConfig& opt) {
  ModelConfig model;
  model.layers = {3, 2, 2};
  Checkpoint c;
  c.state = InitModelState(model, opt, 5);
  for (auto& t : c.state.opt_state) {
    for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = 0.25f * static_cast<float>(i);
  }
  c.state.optimizer_steps = 17;
  c.epoch = 2;
  c.step_in_epoch = 9;
  c.seed = 1234;
  c.pipeline_position = {{"shuffle", "1"}, {"window", "8"}};
  c.run_config = {{"lr", "0.01"}, {"optimizer", "adamw"}};
  c.samples_in_epoch = 288;
  c.samples_total = 1312;
  c.identity = {{"batch_size", "32"}, {"data.manifest_xxh3", "0123456789abcdef"}};
  return c;
}

void ExpectEqualCheckpoints(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.state.model.layers, b.state.model.layers);
  EXPECT_EQ(a.state.optimizer_steps, b.state.optimizer_steps);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step_in_epoch, b.step_in_epoch);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.pipeline_position, b.pipeline_position);
  EXPECT_EQ(a.run_config, b.run_config);
  EXPECT_EQ(a.samples_in_epoch, b.samples_in_epoch);
  EXPECT_EQ(a.samples_total, b.samples_total);
  EXPECT_EQ(a.identity, b.identity);
  ASSERT_EQ(a.state.params.size(), b.state.params.size());
  ASSERT_EQ(a.state.opt_state.size(), b.state.opt_state.size());
  for (size_t p = 0; p < a.state.params.size(); ++p) {
    EXPECT_EQ(a.state.params[p].name, b.state.params[p].name);
    EXPECT_EQ(a.state.params[p].shape, b.state.params[p].shape);
    EXPECT_EQ(a.state.params[p].values, b.state.params[p].values);
  }
  for (size_t p = 0; p < a.state.opt_state.size(); ++p) {
    EXPECT_EQ(a.state.opt_state[p].name, b.state.opt_state[p].name);
    EXPECT_EQ(a.state.opt_state[p].values, b.state.opt_state[p].values);
  }
}

TEST(CheckpointTest, RoundTripsThroughAnEnvForEveryOptimizer) {
  OptimizerConfig sgd, momentum, adamw;
  momentum.momentum = 0.9f;
  adamw.kind = OptimizerKind::kAdamW;
  auto env = NewMemEnv();
  for (const auto& opt : {sgd, momentum, adamw}) {
    const Checkpoint c = SmallCheckpoint(opt);
    ASSERT_TRUE(WriteCheckpoint(env.get(), "/ck/run.ckpt", c).ok());
    auto back = ReadCheckpoint(env.get(), "/ck/run.ckpt");
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectEqualCheckpoints(*back, c);
    EXPECT_FALSE(env->FileExists("/ck/run.ckpt.tmp"));
  }
}

TEST(CheckpointTest, EverySingleByteFlipIsDetectedAsDataLoss) {
  OptimizerConfig momentum;
  momentum.momentum = 0.9f;
  auto encoded = EncodeCheckpoint(SmallCheckpoint(momentum));
  ASSERT_TRUE(encoded.ok());
  const std::string good = *encoded;
  ASSERT_TRUE(DecodeCheckpoint(good, "good").ok());
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      auto result = DecodeCheckpoint(bad, "/ck/flipped.ckpt");
      ASSERT_FALSE(result.ok()) << "byte " << i << " flip " << int{flip} << " not detected";
      ASSERT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
      ASSERT_THAT(std::string(result.status().message()), HasSubstr("/ck/flipped.ckpt"));
    }
  }
}

TEST(CheckpointTest, CorruptTensorPayloadNamesTheSection) {
  auto good = *EncodeCheckpoint(SmallCheckpoint(OptimizerConfig{}));
  // The first tensor section starts after the header (16), model (16+16+8) and position
  // (16+32+8) sections; its payload begins 16 bytes later.
  const size_t tensor_payload = 16 + 40 + 56 + 16;
  good[tensor_payload + 20] ^= 0x10;
  auto result = DecodeCheckpoint(good, "run.ckpt");
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("tensor section 2"));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("checksum mismatch"));
}

TEST(CheckpointTest, TruncatedOrExtendedFilesAreDataLoss) {
  const std::string good = *EncodeCheckpoint(SmallCheckpoint(OptimizerConfig{}));
  for (size_t len : {size_t{0}, size_t{10}, size_t{24}, good.size() / 2, good.size() - 1}) {
    EXPECT_EQ(DecodeCheckpoint(good.substr(0, len), "t").status().code(),
              absl::StatusCode::kDataLoss)
        << len;
  }
  EXPECT_EQ(DecodeCheckpoint(good + "x", "t").status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointTest, WorkedExampleMatchesSpec) {
  // docs/formats/checkpoint.md's worked example.
  Checkpoint c;
  c.state.model.layers = {2, 2};
  c.state.params = {HostTensor{"0.weight", {2, 2}, {1, 2, 3, 4}},
                    HostTensor{"0.bias", {2}, {0.5f, -0.5f}}};
  c.state.optimizer_steps = 3;
  c.epoch = 1;
  c.step_in_epoch = 4;
  c.seed = 42;
  c.samples_in_epoch = 8;
  c.samples_total = 20;
  c.pipeline_position = {{"shuffle", "0"}};
  c.run_config = {{"lr", "0.01"}};
  const std::string f = *EncodeCheckpoint(c);
  ASSERT_EQ(f.size(), 380u);
  EXPECT_EQ(f.substr(0, 8), "SLUICECK");
  EXPECT_EQ(DecodeFixed32(f.data() + 8), 2u);  // version
  EXPECT_EQ(DecodeFixed32(f.data() + 12), 7u);
  EXPECT_EQ(DecodeFixed64(f.data() + 0x18), 12u);  // model length
  EXPECT_EQ(DecodeFixed64(f.data() + 0x3c), 48u);  // position length
  EXPECT_EQ(DecodeFixed64(f.data() + 0x44), 3u);   // optimizer_steps
  EXPECT_EQ(DecodeFixed64(f.data() + 0x5c), 42u);  // seed
  EXPECT_EQ(DecodeFixed64(f.data() + 0x64), 8u);   // samples_in_epoch
  EXPECT_EQ(DecodeFixed64(f.data() + 0x6c), 20u);  // samples_total
  EXPECT_EQ(DecodeFixed64(f.data() + 0x84), 52u);  // 0.weight section length
  EXPECT_EQ(f.substr(0x94, 8), "0.weight");
  EXPECT_EQ(DecodeFixed32(f.data() + 0xb0), 0x3f800000u);  // 1.0f
  EXPECT_EQ(f.substr(0xe0, 6), "0.bias");
  EXPECT_EQ(DecodeFixed32(f.data() + 0xf6), 0xbf000000u);  // -0.5f
  EXPECT_EQ(DecodeFixed64(f.data() + 0x10a), 20u);         // pipeline length
  EXPECT_EQ(DecodeFixed64(f.data() + 0x136), 18u);         // run config length
  EXPECT_EQ(f.substr(0x14c, 4), "0.01");
  EXPECT_EQ(DecodeFixed32(f.data() + 0x158), 6u);  // run identity section type
  EXPECT_EQ(DecodeFixed64(f.data() + 0x160), 4u);  // run identity length
  EXPECT_EQ(DecodeFixed32(f.data() + 0x168), 0u);  // count 0
  auto back = DecodeCheckpoint(f, "example");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualCheckpoints(*back, c);
}

TEST(CheckpointTest, FailedWriteLeavesThePreviousCheckpointAndNoTemporary) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  const Checkpoint first = SmallCheckpoint(OptimizerConfig{});
  ASSERT_TRUE(WriteCheckpoint(&env, "/ck/run.ckpt", first).ok());
  Checkpoint second = first;
  second.epoch = 7;
  env.FailWritesAfter(100);
  EXPECT_FALSE(WriteCheckpoint(&env, "/ck/run.ckpt", second).ok());
  env.FailWritesAfter(-1);
  env.FailRenames(true);
  EXPECT_FALSE(WriteCheckpoint(&env, "/ck/run.ckpt", second).ok());
  env.FailRenames(false);
  EXPECT_FALSE(mem->FileExists("/ck/run.ckpt.tmp"));
  auto back = ReadCheckpoint(mem.get(), "/ck/run.ckpt");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->epoch, 2u);
}

// Version 1 files (before the run identity) are refused with a message naming the version.
TEST(CheckpointTest, Version1FileIsRefusedNamingTheVersion) {
  std::string f = *EncodeCheckpoint(SmallCheckpoint(OptimizerConfig{}));
  EncodeFixed32(f.data() + 8, 1);
  auto back = DecodeCheckpoint(f, "/old.ckpt");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("/old.ckpt"), std::string::npos) << back.status();
  EXPECT_NE(back.status().message().find("unsupported checkpoint version 1 (this build reads 2)"),
            std::string::npos)
      << back.status();
}

TEST(CheckpointTest, IdentityDifferencesListEveryChangedKeyWithOldAndNew) {
  const KeyValues saved = {
      {"batch_size", "32"}, {"lr", "0.01"}, {"momentum", "0.9"}, {"seed", "1"}};
  const KeyValues now = {{"batch_size", "40"}, {"lr", "0.01"}, {"seed", "1"}, {"beta1", "0.9"}};
  EXPECT_EQ(IdentityDifferences(saved, now),
            (std::vector<std::string>{"batch_size: 32 in the checkpoint, 40 now",
                                      "momentum: 0.9 in the checkpoint, (absent) now",
                                      "beta1: (absent) in the checkpoint, 0.9 now"}));
  EXPECT_TRUE(IdentityDifferences(saved, saved).empty());
}

TEST(CheckpointTest, MissingFileIsNotFound) {
  auto env = NewMemEnv();
  EXPECT_EQ(ReadCheckpoint(env.get(), "/nope.ckpt").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice
