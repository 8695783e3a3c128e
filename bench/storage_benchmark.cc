// Storage throughput: shard writing per zstd level, read + verify + decompress, and the raw
// zstd decompression ceiling on the same frames. Data: Fashion-MNIST train (60,000 28x28 u8
// images) from /usr/share/datasets/fashion-mnist, else synthetic records of the same shape
// (labelled "synthetic" in the output). Files live in a MemEnv so the figures measure the
// CPU work, not the disk. Figures and commands: docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <zstd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/env.h"
#include "common/testing/mem_env.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "storage/idx.h"
#include "storage/shard_reader.h"

namespace sluice {
namespace {

constexpr char kImages[] = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
constexpr char kLabels[] = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";

struct Input {
  RecordArrays records;
  bool real = false;
};

const Input& TrainImages() {
  static const Input* input = [] {
    auto* in = new Input;
    auto idx = ReadIdxPair(Env::Default(), kImages, kLabels);
    if (idx.ok()) {
      in->records = std::move(idx->records);
      in->real = true;
    } else {
      RecordArrays& r = in->records;
      r.spec.height = r.spec.width = 28;
      r.count = 60000;
      r.samples.resize(r.count * 784);
      r.labels.resize(r.count);
      uint32_t x = 1;
      for (char& c : r.samples) c = static_cast<char>((x = x * 1103515245 + 12345) >> 28);
      for (size_t i = 0; i < r.count; ++i) r.labels[i] = static_cast<char>(i % 10);
    }
    return in;
  }();
  return *input;
}

uint64_t RawBytes(const RecordArrays& r) { return r.count * r.spec.record_bytes(); }

WriteDatasetOptions Options(int level, int threads) {
  WriteDatasetOptions o;
  o.sharding.zstd_level = level;  // defaults otherwise: 16384 records per shard, 256 per frame
  o.threads = threads;
  return o;
}

// The train split written at `level` into a MemEnv, shared by the read benchmarks.
struct Written {
  std::unique_ptr<Env> env;
  std::unique_ptr<Dataset> dataset;
  std::vector<const ShardReader*> shards;
  uint64_t stored = 0;
};

const Written& WrittenAt(int level) {
  static std::map<int, Written>* cache = new std::map<int, Written>;
  auto it = cache->find(level);
  if (it != cache->end()) return it->second;
  Written w;
  w.env = NewMemEnv();
  auto m = WriteDataset(w.env.get(), "/d", "train", TrainImages().records, Options(level, 0));
  if (!m.ok()) std::abort();
  w.dataset = std::move(Dataset::Open(w.env.get(), "/d").value());
  for (size_t i = 0; i < m->shards.size(); ++i) {
    w.shards.push_back(w.dataset->shard(i).value());
    w.stored += m->shards[i].bytes;
  }
  return cache->emplace(level, std::move(w)).first->second;
}

void SetCommon(benchmark::State& state, uint64_t raw, uint64_t stored) {
  const RecordArrays& r = TrainImages().records;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * r.count));
  state.counters["ratio"] = static_cast<double>(raw) / static_cast<double>(stored);
  state.SetLabel(TrainImages().real ? "fashion-mnist train" : "synthetic");
}

// Args: zstd level, compression threads. Bytes are raw record bytes written.
void BM_ShardWrite_Level(benchmark::State& state) {
  const RecordArrays& r = TrainImages().records;
  const int level = static_cast<int>(state.range(0));
  uint64_t stored = 0;
  for (auto _ : state) {
    auto env = NewMemEnv();
    auto m = WriteDataset(env.get(), "/d", "train", r, Options(level, state.range(1)));
    if (!m.ok()) state.SkipWithError(std::string(m.status().message()).c_str());
    stored = 0;
    for (const ShardEntry& e : m->shards) stored += e.bytes;
  }
  SetCommon(state, RawBytes(r), stored);
}
BENCHMARK(BM_ShardWrite_Level)
    ->ArgNames({"level", "threads"})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({3, 1})
    ->Args({3, 2})
    ->Args({9, 1})
    ->Args({9, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// Level 19 takes seconds per pass: one pass is enough.
BENCHMARK(BM_ShardWrite_Level)
    ->ArgNames({"level", "threads"})
    ->Args({19, 2})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One thread reads every frame of the split, checks its XXH3 and decompresses it: the work one
// pipeline worker does per frame. Arg: the level the data was written at.
void BM_ShardRead_VerifyDecompress(benchmark::State& state) {
  const Written& w = WrittenAt(static_cast<int>(state.range(0)));
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::string stored, raw;
  for (auto _ : state) {
    for (const ShardReader* r : w.shards) {
      for (uint32_t i = 0; i < r->frame_count(); ++i) {
        raw.resize(r->frames()[i].raw_size);
        if (!r->ReadStoredFrame(i, &stored).ok() ||
            !r->DecodeFrame(i, stored, absl::MakeSpan(raw.data(), raw.size()), dctx).ok()) {
          state.SkipWithError("read failed");
        }
      }
    }
    benchmark::DoNotOptimize(raw.data());
  }
  ZSTD_freeDCtx(dctx);
  SetCommon(state, RawBytes(TrainImages().records), w.stored);
}
BENCHMARK(BM_ShardRead_VerifyDecompress)
    ->ArgName("level")
    ->Arg(1)
    ->Arg(3)
    ->Arg(9)
    ->Arg(19)
    ->Unit(benchmark::kMillisecond);

// The ceiling: ZSTD_decompressDCtx alone on the same frames, already in memory.
void BM_ZstdDecompress_Ceiling(benchmark::State& state) {
  const Written& w = WrittenAt(static_cast<int>(state.range(0)));
  std::vector<std::string> frames;
  for (const ShardReader* r : w.shards) {
    for (uint32_t i = 0; i < r->frame_count(); ++i) {
      frames.emplace_back();
      if (!r->ReadStoredFrame(i, &frames.back()).ok()) std::abort();
    }
  }
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::string raw(256 * 785, '\0');
  for (auto _ : state) {
    for (const std::string& f : frames) {
      size_t n = ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), f.data(), f.size());
      if (ZSTD_isError(n)) state.SkipWithError("zstd failed");
    }
    benchmark::DoNotOptimize(raw.data());
  }
  ZSTD_freeDCtx(dctx);
  SetCommon(state, RawBytes(TrainImages().records), w.stored);
}
BENCHMARK(BM_ZstdDecompress_Ceiling)
    ->ArgName("level")
    ->Arg(1)
    ->Arg(3)
    ->Arg(9)
    ->Arg(19)
    ->Unit(benchmark::kMillisecond);

// XXH3 over the stored frames: the verification share of a read.
void BM_Xxh3_StoredFrames(benchmark::State& state) {
  const Written& w = WrittenAt(3);
  std::vector<std::string> frames;
  uint64_t bytes = 0;
  for (const ShardReader* r : w.shards) {
    for (uint32_t i = 0; i < r->frame_count(); ++i) {
      frames.emplace_back();
      if (!r->ReadStoredFrame(i, &frames.back()).ok()) std::abort();
      bytes += frames.back().size();
    }
  }
  for (auto _ : state) {
    for (const std::string& f : frames) benchmark::DoNotOptimize(Xxh3(f));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Xxh3_StoredFrames)->Unit(benchmark::kMillisecond);

// Reading the .gz IDX pair (inflate + parse): the part of `sluice-shard create` before
// compression starts.
void BM_IdxRead_FashionTrainGz(benchmark::State& state) {
  if (!TrainImages().real) {
    state.SkipWithError("Fashion-MNIST not installed");
    return;
  }
  for (auto _ : state) {
    auto in = ReadIdxPair(Env::Default(), kImages, kLabels);
    if (!in.ok()) state.SkipWithError("read failed");
    benchmark::DoNotOptimize(in->records.samples.data());
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * RawBytes(TrainImages().records)));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 60000));
}
BENCHMARK(BM_IdxRead_FashionTrainGz)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
