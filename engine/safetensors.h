// Export of a model's parameters in the safetensors format (https://github.com/huggingface/
// safetensors): u64 little-endian header length N, N bytes of JSON
//   {"__metadata__": {"format": "pt", ...}, "0.weight": {"dtype": "F32", "shape": [128, 784],
//    "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8, then the raw little-endian tensor data. Keys are those
// of the reference PyTorch model nn.Sequential(Linear, ReLU, Linear, ...): Linear k is "2k", so
// torch's model.load_state_dict() accepts the file as is.
// Errors: Env errors as is; kDataLoss from DecodeSafetensors for a malformed file.
// Thread safety: free functions; thread safe.
#ifndef SLUICE_ENGINE_SAFETENSORS_H_
#define SLUICE_ENGINE_SAFETENSORS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "engine/model.h"

namespace sluice {

// The file's bytes: state.params (optimizer state is not exported), F32.
std::string EncodeSafetensors(const ModelState& state);
// Writes atomically (temp, fsync, rename).
absl::Status ExportSafetensors(Env* env, const std::string& path, const ModelState& state);
// Parses an F32 safetensors file into tensors, in data-offset order (for tests and tools).
absl::StatusOr<std::vector<HostTensor>> DecodeSafetensors(absl::string_view data,
                                                          absl::string_view source);

}  // namespace sluice

#endif  // SLUICE_ENGINE_SAFETENSORS_H_
