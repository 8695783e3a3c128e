// Deterministic synthetic records for storage tests.
#ifndef SLUICE_TESTS_STORAGE_TEST_RECORDS_H_
#define SLUICE_TESTS_STORAGE_TEST_RECORDS_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "common/coding.h"
#include "storage/dataset_writer.h"

namespace sluice::testing {

// `count` records of `spec`, with values that compress somewhat (small ranges, repeats) and
// labels 0..9 (i32 labels include negatives).
inline RecordArrays MakeRecords(const RecordSpec& spec, uint64_t count, uint32_t seed = 1) {
  RecordArrays r;
  r.spec = spec;
  r.count = count;
  uint32_t x = seed * 2654435761u + 1;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  };
  const size_t values = spec.sample_values() * count;
  if (spec.sample_dtype == SampleDType::kU8) {
    r.samples.resize(values);
    for (size_t i = 0; i < values; ++i) r.samples[i] = static_cast<char>(next() % 7 * 31);
  } else {
    r.samples.resize(values * 4);
    for (size_t i = 0; i < values; ++i) {
      float f = static_cast<float>(next() % 1000) / 7.0f - 50.0f;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      EncodeFixed32(r.samples.data() + 4 * i, bits);
    }
  }
  if (spec.label_dtype == LabelDType::kU8) {
    r.labels.resize(count);
    for (uint64_t i = 0; i < count; ++i) r.labels[i] = static_cast<char>(next() % 10);
  } else {
    r.labels.resize(count * 4);
    for (uint64_t i = 0; i < count; ++i) {
      EncodeFixed32(r.labels.data() + 4 * i, static_cast<uint32_t>(int32_t(next() % 2001) - 1000));
    }
  }
  return r;
}

inline RecordSpec U8Spec(uint32_t h, uint32_t w, uint32_t c = 1) {
  RecordSpec s;
  s.height = h;
  s.width = w;
  s.channels = c;
  return s;
}

inline WriteDatasetOptions Options(uint64_t per_shard, uint32_t per_frame, int threads = 1) {
  WriteDatasetOptions o;
  o.sharding.records_per_shard = per_shard;
  o.sharding.records_per_frame = per_frame;
  o.sharding.zstd_level = 3;
  o.threads = threads;
  return o;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORAGE_TEST_RECORDS_H_
