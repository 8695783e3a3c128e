// A learnable synthetic 28x28 split for the end-to-end tests of the tools.
#ifndef SLUICE_TESTS_TOOLS_LEARNABLE_RECORDS_H_
#define SLUICE_TESTS_TOOLS_LEARNABLE_RECORDS_H_

#include <cstdint>
#include <random>

#include "storage/dataset_writer.h"

namespace sluice::testing {

// `count` u8 images of 28x28 with u8 labels: class c lights up row band c (values 128..255)
// over a noise floor of 0..noise-1.
inline RecordArrays MakeLearnableRecords(uint64_t count, uint64_t seed, int noise = 40) {
  RecordArrays r;
  r.spec = {SampleDType::kU8, LabelDType::kU8, 28, 28, 1};
  r.count = count;
  r.samples.resize(count * 784);
  r.labels.resize(count);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % 10);
    r.labels[i] = static_cast<char>(label);
    for (int p = 0; p < 784; ++p) {
      const int row = p / 28;
      const bool lit = row >= label * 2 + 4 && row < label * 2 + 7;
      r.samples[i * 784 + p] = static_cast<char>(lit ? 128 + rng() % 128 : rng() % noise);
    }
  }
  return r;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TOOLS_LEARNABLE_RECORDS_H_
