// Checkpoints: the whole training state of a run, on disk (docs/formats/checkpoint.md).
// Save: Backend::SaveState (device -> host), EncodeCheckpoint, WriteCheckpoint (atomic: temp
// file, fsync, rename). Load: ReadCheckpoint (validates every checksum and field), then
// Backend::LoadState (host -> device).
//
// Errors: kDataLoss for any corruption, naming the file and the section; kInvalidArgument when
// asked to encode an inconsistent state; Env errors (kNotFound, kResourceExhausted, ...) as is.
// Thread safety: free functions over values; thread safe.
#ifndef SLUICE_ENGINE_CHECKPOINT_H_
#define SLUICE_ENGINE_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "engine/model.h"

namespace sluice {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct Checkpoint {
  ModelState state;    // model config, parameters, optimizer state and step count
  uint64_t epoch = 0;  // the next batch to train on: batch `step_in_epoch` of `epoch`
  uint64_t step_in_epoch = 0;
  uint64_t seed = 0;              // the run's seed (init, shuffle)
  uint64_t samples_in_epoch = 0;  // samples trained in `epoch` before batch `step_in_epoch`
  uint64_t samples_total = 0;     // samples trained in the whole run so far
  KeyValues pipeline_position;    // opaque to the engine: the pipeline's position and settings
  KeyValues run_config;           // the run's flags, e.g. {"lr", "0.01"}, {"optimizer", "sgd"}
  KeyValues identity;             // what defines the run; a resume must match it (format doc)
};

// The keys whose values differ between `saved` (a checkpoint's identity) and `now`, each as
// "key: <old> in the checkpoint, <new> now" ("(absent)" for a key on one side only), in the
// order of `saved` then the keys only `now` has. Empty: the same run.
std::vector<std::string> IdentityDifferences(const KeyValues& saved, const KeyValues& now);

// Returns the value of `key` in `kv`, or nullptr.
const std::string* FindValue(const KeyValues& kv, absl::string_view key);

// OK when every parameter and optimizer-state value of `state` is finite; else kOutOfRange naming
// the first tensor and index holding a NaN or an infinity. Checked before any checkpoint or
// export is written, so a diverged run never replaces good weights.
absl::Status CheckFiniteState(const ModelState& state);

// The file's bytes. kInvalidArgument when a tensor's values do not match its shape.
absl::StatusOr<std::string> EncodeCheckpoint(const Checkpoint& checkpoint);
// Parses and validates `data`; `source` (a path) names the file in error messages.
absl::StatusOr<Checkpoint> DecodeCheckpoint(absl::string_view data, absl::string_view source);

// Encodes and writes atomically. On error `path` is untouched and no temporary remains.
absl::Status WriteCheckpoint(Env* env, const std::string& path, const Checkpoint& checkpoint);
absl::StatusOr<Checkpoint> ReadCheckpoint(Env* env, const std::string& path);

}  // namespace sluice

#endif  // SLUICE_ENGINE_CHECKPOINT_H_
