// Constants of the checkpoint format, shared by reader and writer. The format is specified byte
// by byte in docs/formats/checkpoint.md; change both together.
#ifndef SLUICE_ENGINE_CHECKPOINT_FORMAT_H_
#define SLUICE_ENGINE_CHECKPOINT_FORMAT_H_

#include <cstdint>

namespace sluice::checkpoint_format {

inline constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'C', 'K'};
inline constexpr uint32_t kVersion = 2;
inline constexpr int kHeaderSize = 16;         // magic, version, section_count
inline constexpr int kSectionHeaderSize = 16;  // type, reserved, length
inline constexpr int kSectionChecksumSize = 8;
inline constexpr int kFooterSize = 8;  // file checksum
// Sections besides the tensors: model, position, pipeline, run config, run identity.
inline constexpr int kFixedSections = 5;

enum SectionType : uint32_t {
  kModel = 1,
  kPosition = 2,
  kTensor = 3,
  kPipeline = 4,
  kRunConfig = 5,
  kRunIdentity = 6,
};

enum TensorKind : uint32_t { kParameter = 0, kOptimizerState = 1 };

}  // namespace sluice::checkpoint_format

#endif  // SLUICE_ENGINE_CHECKPOINT_FORMAT_H_
