// Fuzzes DecodeCheckpoint (docs/formats/checkpoint.md) over arbitrary bytes.
//
// Checksums guard every byte, so random mutations almost never get past the first section's
// checksum. Each input is therefore tried twice: as given, and with every section checksum and
// the file checksum recomputed, which lets the fuzzer reach the structural checks behind them.
// A crash, sanitizer report or __builtin_trap() (a broken invariant below) is a bug.
//
// `--write-seed DIR` (not a libFuzzer flag: handled before libFuzzer sees the arguments) writes a
// checkpoint encoded by the code itself into DIR, so the seed always follows the format.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/env.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_format.h"

namespace sluice {
namespace {

namespace fmt = checkpoint_format;

void Check(const std::string& bytes) {
  auto c = DecodeCheckpoint(bytes, "fuzz.ckpt");
  if (!c.ok()) {
    if (c.status().code() != absl::StatusCode::kDataLoss) __builtin_trap();
    return;
  }
  // Invariants promised by a successful decode: shapes consistent with the model, and the
  // checkpoint encodes back to exactly the same bytes.
  const ModelState& s = c->state;
  if (s.model.layers.size() < 2 || s.params.size() != 2 * (s.model.layers.size() - 1) ||
      s.opt_state.size() % s.params.size() != 0) {
    __builtin_trap();
  }
  for (const auto* tensors : {&s.params, &s.opt_state}) {
    for (const HostTensor& t : *tensors) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      if (n != static_cast<int64_t>(t.values.size())) __builtin_trap();
    }
  }
  auto again = EncodeCheckpoint(*c);
  if (!again.ok() || *again != bytes) __builtin_trap();
}

// Recomputes each section checksum while the section walk stays inside the file, then the
// file checksum.
bool RepairChecksums(std::string* b) {
  const size_t size = b->size();
  if (size < static_cast<size_t>(fmt::kHeaderSize + fmt::kFooterSize)) return false;
  const size_t body_end = size - fmt::kFooterSize;
  const uint32_t sections = DecodeFixed32(b->data() + 12);
  size_t offset = fmt::kHeaderSize;
  for (uint32_t i = 0; i < sections; ++i) {
    if (body_end - offset <
            static_cast<size_t>(fmt::kSectionHeaderSize + fmt::kSectionChecksumSize) ||
        offset > body_end) {
      break;
    }
    const uint64_t length = DecodeFixed64(b->data() + offset + 8);
    if (length > body_end - offset - fmt::kSectionHeaderSize - fmt::kSectionChecksumSize) break;
    const size_t checksum_at = offset + fmt::kSectionHeaderSize + length;
    EncodeFixed64(b->data() + checksum_at,
                  Xxh3(absl::string_view(b->data() + offset, fmt::kSectionHeaderSize + length)));
    offset = checksum_at + fmt::kSectionChecksumSize;
  }
  EncodeFixed64(b->data() + body_end, Xxh3(absl::string_view(b->data(), body_end)));
  return true;
}

// A small SGD-with-momentum checkpoint, as the trainer writes it.
int WriteSeed(const std::string& dir) {
  OptimizerConfig opt;
  opt.momentum = 0.9f;
  ModelConfig model;
  model.layers = {3, 2, 2};
  Checkpoint c;
  c.state = InitModelState(model, opt, 5);
  c.state.optimizer_steps = 7;
  c.epoch = 1;
  c.step_in_epoch = 3;
  c.seed = 5;
  c.samples_in_epoch = 96;
  c.samples_total = 1096;
  c.pipeline_position = {{"shuffle", "1"}};
  c.run_config = {{"lr", "0.01"}};
  c.identity = {{"batch_size", "32"}, {"optimizer", "sgd"}};
  Env* env = Env::Default();
  if (!env->CreateDirs(dir).ok()) return 1;
  return WriteCheckpoint(env, JoinPath(dir, "seed.ckpt"), c).ok() ? 0 : 1;
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i + 1 < *argc; ++i) {
    if (std::strcmp((*argv)[i], "--write-seed") == 0) std::exit(sluice::WriteSeed((*argv)[i + 1]));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  sluice::Check(bytes);
  if (sluice::RepairChecksums(&bytes)) sluice::Check(bytes);
  return 0;
}
