// Fuzzes Manifest::FromJson (docs/formats/shard.md, "Dataset directory and manifest") and what
// `sluice-shard export` does with a manifest that parses: Dataset::Open + ReadAllRecords.
//
// The input is the manifest text. When it parses, it is written into an in-memory directory
// together with one shard file per name the manifest lists, each holding the format doc's worked
// example shard (3 u8 2x2x1 records, 2 per frame); a manifest that agrees with that shard reads
// back all its records. Whatever the manifest claims (record counts, shapes, file names), no
// input may crash, trip a sanitizer, or make a reader allocate more than the shards hold
// (libFuzzer's -rss_limit_mb / malloc limit report that as a crash). A __builtin_trap() is a
// broken invariant below.
//
// `--write-seed DIR` (handled before libFuzzer sees the arguments) writes the manifest that
// matches the worked example shard into DIR (how seeds/manifest_reader_fuzzer/worked_example.
// manifest.json was made).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "common/checksum.h"
#include "common/env.h"
#include "common/testing/mem_env.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"

#ifndef SLUICE_WORKED_SHARD
#error "SLUICE_WORKED_SHARD must name the worked example shard file"
#endif

namespace sluice {
namespace {

constexpr char kDir[] = "/d";
constexpr char kManifest[] = "/d/train.manifest.json";

std::string* worked_shard = nullptr;

void Write(Env* env, const std::string& path, const std::string& bytes) {
  auto f = env->NewWritableFile(path);
  if (!f.ok() || !(*f)->Append(bytes).ok() || !(*f)->Close().ok()) __builtin_trap();
}

void Check(const std::string& json) {
  auto m = Manifest::FromJson(json, kManifest);
  if (!m.ok()) {
    if (m.status().code() != absl::StatusCode::kDataLoss) __builtin_trap();
    return;
  }
  // A manifest that parses writes canonical text that parses to the same manifest.
  const std::string canonical = m->ToJson();
  auto again = Manifest::FromJson(canonical, kManifest);
  if (!again.ok() || again->ToJson() != canonical) __builtin_trap();

  // The export path: open the directory and read every record.
  std::unique_ptr<Env> env = NewMemEnv();
  if (!env->CreateDirs(kDir).ok()) __builtin_trap();
  Write(env.get(), kManifest, json);
  std::set<std::string> written;
  for (const ShardEntry& e : m->shards) {
    if (e.file.empty() || e.file.find('/') != std::string::npos || e.file == "." ||
        e.file == "..") {
      __builtin_trap();  // FromJson promises plain names
    }
    if (written.insert(e.file).second) Write(env.get(), JoinPath(kDir, e.file), *worked_shard);
  }
  auto ds = Dataset::Open(env.get(), kManifest);
  if (!ds.ok()) return;
  auto records = ReadAllRecords(**ds, 1);
  if (!records.ok()) {
    const auto code = records.status().code();
    // Encoded images (version 2) are not fixed-size arrays: ReadAllRecords refuses them.
    if (m->spec.encoded() && code == absl::StatusCode::kInvalidArgument) return;
    if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kResourceExhausted &&
        code != absl::StatusCode::kNotFound) {
      __builtin_trap();
    }
    return;
  }
  if (records->count != m->record_count ||
      records->samples.size() != records->count * records->spec.sample_bytes() ||
      records->labels.size() != records->count * records->spec.label_bytes()) {
    __builtin_trap();
  }
}

int WriteSeed(const std::string& dir) {
  Manifest m;
  m.split = "train";
  m.record_count = 3;
  m.spec.sample_dtype = SampleDType::kU8;
  m.spec.height = 2;
  m.spec.width = 2;
  m.spec.channels = 1;
  m.spec.label_dtype = LabelDType::kU8;
  m.options.records_per_frame = 2;
  ShardEntry e;
  e.file = "train-00000.shard";
  e.record_count = 3;
  e.frame_count = 2;
  e.bytes = worked_shard->size();
  e.xxh3 = Xxh3(*worked_shard);
  m.shards.push_back(e);
  std::ofstream out(dir + "/worked_example.manifest.json", std::ios::binary);
  out << m.ToJson();
  return out.good() ? 0 : 1;
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::ifstream in(SLUICE_WORKED_SHARD, std::ios::binary);
  sluice::worked_shard = new std::string(std::istreambuf_iterator<char>(in), {});
  if (sluice::worked_shard->empty()) std::abort();
  for (int i = 1; i + 1 < *argc; ++i) {
    if (std::strcmp((*argv)[i], "--write-seed") == 0) std::exit(sluice::WriteSeed((*argv)[i + 1]));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sluice::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
