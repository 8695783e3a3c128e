// Helpers for pipeline tests: small datasets whose samples encode their record index, a
// counting Env, and a collector that runs a pipeline to the end.
#ifndef SLUICE_TESTS_PIPELINE_TEST_UTIL_H_
#define SLUICE_TESTS_PIPELINE_TEST_UTIL_H_

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/testing/mem_env.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice::testing {

// Records of 4x4 u8 pixels: bytes 0..3 hold the record index (little-endian), the rest a
// pattern of it; label = index % 10.
inline RecordArrays IndexedRecords(uint32_t n) {
  RecordArrays r;
  r.spec.sample_dtype = SampleDType::kU8;
  r.spec.label_dtype = LabelDType::kU8;
  r.spec.height = 4;
  r.spec.width = 4;
  r.spec.channels = 1;
  r.count = n;
  r.samples.resize(size_t{n} * 16);
  r.labels.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    char* s = r.samples.data() + size_t{i} * 16;
    std::memcpy(s, &i, 4);
    for (int j = 4; j < 16; ++j) s[j] = static_cast<char>((i * 31 + j * 7) & 0xff);
    r.labels[i] = static_cast<char>(i % 10);
  }
  return r;
}

// Counts the bytes read per (file, offset).
class CountingEnv : public Env {
 public:
  explicit CountingEnv(Env* base) : base_(base) {}
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    auto f = base_->NewRandomAccessFile(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<RandomAccessFile>(new File(this, std::move(*f)));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return base_->NewWritableFile(p);
  }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& p) override {
    return base_->GetFileSize(p);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& d) override {
    return base_->GetChildren(d);
  }
  absl::Status CreateDirs(const std::string& d) override { return base_->CreateDirs(d); }
  absl::Status DeleteFile(const std::string& p) override { return base_->DeleteFile(p); }
  absl::Status RenameFile(const std::string& a, const std::string& b) override {
    return base_->RenameFile(a, b);
  }
  absl::Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& p) override {
    return base_->LockFile(p);
  }

  // Reads that started at `offset` of a file whose path ends in `name`.
  int ReadsAt(const std::string& name, uint64_t offset) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const auto& [key, count] : reads_) {
      if (key.second == offset && key.first.size() >= name.size() &&
          key.first.compare(key.first.size() - name.size(), name.size(), name) == 0) {
        n += count;
      }
    }
    return n;
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mu_);
    reads_.clear();
  }

 private:
  class File : public RandomAccessFile {
   public:
    File(CountingEnv* env, std::unique_ptr<RandomAccessFile> f) : env_(env), f_(std::move(f)) {}
    absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
      {
        std::lock_guard<std::mutex> l(env_->mu_);
        ++env_->reads_[{f_->path(), offset}];
      }
      return f_->Read(offset, n, scratch);
    }
    uint64_t Size() const override { return f_->Size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    CountingEnv* env_;
    std::unique_ptr<RandomAccessFile> f_;
  };
  Env* base_;
  std::mutex mu_;
  std::map<std::pair<std::string, uint64_t>, int> reads_;
};

// A dataset in a MemEnv: `n` indexed records, `per_shard` records per shard, `per_frame` per
// frame (so shards end in short frames unless the numbers divide).
struct TestDataset {
  std::unique_ptr<Env> mem = NewMemEnv();
  std::unique_ptr<CountingEnv> env;
  std::unique_ptr<Dataset> dataset;
  Manifest manifest;

  TestDataset(uint32_t n, uint32_t per_shard, uint32_t per_frame) {
    env = std::make_unique<CountingEnv>(mem.get());
    WriteDatasetOptions o;
    o.sharding.records_per_shard = per_shard;
    o.sharding.records_per_frame = per_frame;
    o.threads = 1;
    auto m = WriteDataset(mem.get(), "/data", "train", IndexedRecords(n), o);
    EXPECT_TRUE(m.ok()) << m.status();
    manifest = *m;
    Reopen();
  }
  void Reopen() {
    auto d = Dataset::Open(env.get(), "/data");
    EXPECT_TRUE(d.ok()) << d.status();
    dataset = std::move(*d);
  }
  // Flips one byte inside frame `frame` of shard `shard`, then reopens.
  void CorruptFrame(uint32_t shard, uint32_t frame) {
    const ShardReader* r = *dataset->shard(shard);
    const std::string path = r->path();
    const FrameInfo fi = r->frames()[frame];
    std::string bytes = *ReadFileToString(mem.get(), path);
    bytes[fi.offset + fi.stored_size / 2] ^= 0x5a;
    auto w = mem->NewWritableFile(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(bytes).ok());
    ASSERT_TRUE((*w)->Close().ok());
    Reopen();
  }
};

struct Batch {
  uint64_t epoch = 0, step = 0;
  std::vector<uint32_t> ids;
  std::vector<int32_t> labels;
  bool operator==(const Batch&) const = default;
};

// The record index a sample encodes, from a host batch in any format (normalization 0/1).
inline uint32_t SampleId(const BatchView& v, uint32_t i) {
  uint8_t b[4];
  for (int j = 0; j < 4; ++j) {
    const size_t k = size_t{i} * v.sample.values() + j;
    float x = 0;
    if (v.sample.dtype == H2DFormat::kU8) {
      b[j] = static_cast<const uint8_t*>(v.samples)[k];
      continue;
    } else if (v.sample.dtype == H2DFormat::kF32) {
      x = static_cast<const float*>(v.samples)[k];
    } else {
      _Float16 h;
      std::memcpy(&h, static_cast<const uint16_t*>(v.samples) + k, 2);
      x = static_cast<float>(h);
    }
    b[j] = static_cast<uint8_t>(std::lround(x * 255.0f));
  }
  uint32_t id;
  std::memcpy(&id, b, 4);
  return id;
}

inline Batch ToBatch(const BatchView& v) {
  Batch b;
  b.epoch = v.epoch;
  b.step = v.step;
  for (uint32_t i = 0; i < v.size; ++i) {
    b.ids.push_back(SampleId(v, i));
    b.labels.push_back(v.labels[i]);
  }
  return b;
}

// Runs `options` over `dataset` to the end.
inline absl::StatusOr<std::vector<Batch>> RunAll(const Dataset* dataset,
                                                 const PipelineOptions& options,
                                                 PipelineStats* stats = nullptr) {
  auto p = Pipeline::Create(dataset, options);
  if (!p.ok()) return p.status();
  std::vector<Batch> out;
  BatchLease lease;
  while (true) {
    absl::StatusOr<bool> got = (*p)->Next(&lease);
    if (!got.ok()) return got.status();
    if (!*got) break;
    out.push_back(ToBatch(lease.view()));
  }
  lease.Release();
  if (stats != nullptr) *stats = (*p)->Stats();
  return out;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_PIPELINE_TEST_UTIL_H_
