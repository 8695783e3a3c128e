#include "engine/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/coding.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

TEST(SafetensorsTest, HeaderFollowsTheStandardLayoutAndRoundTrips) {
  ModelState state = InitModelState(ModelConfig{}, OptimizerConfig{}, 1);
  const std::string file = EncodeSafetensors(state);
  const uint64_t header_len = DecodeFixed64(file.data());
  EXPECT_EQ(header_len % 8, 0u);
  const std::string header = file.substr(8, header_len);
  EXPECT_NE(header.find("\"0.weight\":{\"dtype\":\"F32\",\"shape\":[128,784]"), std::string::npos)
      << header;
  EXPECT_NE(header.find("\"2.bias\""), std::string::npos);
  EXPECT_EQ(file.size(), 8 + header_len + 4 * 101770);
  auto back = DecodeSafetensors(file, "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 4u);
  for (size_t p = 0; p < 4; ++p) {
    EXPECT_EQ((*back)[p].name, state.params[p].name);
    EXPECT_EQ((*back)[p].shape, state.params[p].shape);
    EXPECT_EQ((*back)[p].values, state.params[p].values);
  }
  EXPECT_EQ(DecodeSafetensors(file.substr(0, 100), "cut").status().code(),
            absl::StatusCode::kDataLoss);
}

// Writes `bytes` to `path` (plain files the python script reads).
void WriteRaw(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

TEST(SafetensorsTest, PyTorchLoadsExportIntoReferenceSequentialAndPredictionsAgree) {
  // Debian's python3-torch lives in /usr/bin/python3, which a pyenv or venv python3 earlier
  // on PATH would hide.
  std::string python;
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import torch' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) {
    GTEST_SKIP() << "no python3 with torch (Debian's python3-torch) is installed";
  }
  // A model trained a few steps on the CPU backend, so the weights are not just the init.
  OptimizerConfig opt;
  const ModelConfig model;
  BackendOptions options;
  options.max_batch = 32;
  auto backend = CreateCpuBackend(InitModelState(model, opt, 8), opt, options);
  ASSERT_TRUE(backend.ok());
  const auto data = testing::MakeDataset(96, 784, 10, 0.5, 4);
  for (int s = 0; s < 96; s += 32) {
    ASSERT_TRUE((*backend)->TrainStep(testing::U8Batch(data, s, 32, 784), 0.05f).ok());
  }
  const ModelState state = *(*backend)->SaveState();

  // Expected logits of 8 inputs, and the backend's predictions of them: Evaluate with labels set
  // to the reference argmax must count all 8 correct.
  const int n = 8;
  const auto eval = testing::MakeDataset(n, 784, 10, 0.5, 99);
  const auto x = testing::NormalizeAll(eval.images.data(), n * 784, Normalization{});
  std::vector<float> hidden(n * 128), logits(n * 10);
  ref::LinearForward(x.data(), state.params[0].values.data(), state.params[1].values.data(), n, 784,
                     128, true, hidden.data());
  ref::LinearForward(hidden.data(), state.params[2].values.data(), state.params[3].values.data(), n,
                     128, 10, false, logits.data());
  testing::Dataset predicted = eval;
  for (int s = 0; s < n; ++s) {
    predicted.labels[s] = static_cast<int32_t>(
        std::max_element(logits.begin() + 10 * s, logits.begin() + 10 * s + 10) -
        (logits.begin() + 10 * s));
  }
  EvalStats stats;
  ASSERT_TRUE((*backend)->Evaluate(testing::U8Batch(predicted, 0, n, 784), &stats).ok());
  ASSERT_EQ(stats.correct, n) << "the CPU backend's predictions differ from the reference";

  const std::string dir = ::testing::TempDir();
  const std::string model_path = dir + "/sluice_export.safetensors";
  ASSERT_TRUE(ExportSafetensors(Env::Default(), model_path, state).ok());
  WriteRaw(dir + "/sluice_inputs.f32", x.data(), 4 * x.size());
  WriteRaw(dir + "/sluice_logits.f32", logits.data(), 4 * logits.size());
  const std::string script = dir + "/sluice_load_safetensors.py";
  std::ofstream(script) << R"PY(
import json, struct, sys
import torch
from torch import nn
model_path, inputs_path, logits_path = sys.argv[1:4]
raw = open(model_path, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
body = bytearray(raw[8 + n:])
state = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    assert info["dtype"] == "F32", info
    b, e = info["data_offsets"]
    state[name] = torch.frombuffer(body[b:e], dtype=torch.float32).reshape(info["shape"]).clone()
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
model.load_state_dict(state)  # strict: every key and shape must match
x = torch.frombuffer(bytearray(open(inputs_path, "rb").read()), dtype=torch.float32).reshape(-1, 784)
expected = torch.frombuffer(bytearray(open(logits_path, "rb").read()), dtype=torch.float32).reshape(-1, 10)
with torch.no_grad():
    got = model(x)
if not torch.allclose(got, expected, atol=1e-4, rtol=1e-4):
    print("logits differ, max abs diff", (got - expected).abs().max().item())
    sys.exit(1)
if not torch.equal(got.argmax(1), expected.argmax(1)):
    print("predictions differ")
    sys.exit(1)
print("OK")
)PY";
  const std::string command = python + " " + script + " " + model_path + " " + dir +
                              "/sluice_inputs.f32 " + dir + "/sluice_logits.f32";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace sluice
