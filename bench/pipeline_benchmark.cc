// Pipeline benchmarks on the real Fashion-MNIST train split (60,000 28x28 u8 images), sharded
// into a temporary directory at start (16384 records per shard, 256 per frame, zstd level 3).
//
//   BM_Pipeline_EndToEnd/format/batch/threads: shards -> host batches, shuffle on (window 64
//     frames); one pipeline runs many epochs (as sluice-train uses it), one epoch per
//     iteration; items = samples, bytes = batch bytes delivered.
//   BM_Pipeline_DataLoaderConfig/threads: bench/compare_dataloader.sh's configuration; a new
//     pipeline per epoch (start-up and drain included, as a DataLoader epoch includes its own).
//   Both Pipeline benchmarks report of_decode_limit = samples/s / (decode_ceiling x threads):
//     decode_ceiling is one thread's zstd decode of these same shards' stored frames from
//     memory (no checksum, no copy, no pipeline), measured right before and right after each
//     run and averaged (a shared VM's rate drifts from minute to minute); the pipeline does
//     that decode plus everything else, so this is the share of the cores' decode work it keeps.
//   BM_Stage_Read: pread of every stored frame (page cache warm after the first iteration).
//   BM_Stage_Decompress/threads: checksum + zstd decode of every frame, from memory.
//   BM_Stage_Preprocess/format: shuffled gather + conversion of one epoch into batch buffers.
//   BM_Stage_DecodeAndAssemble/assemble/format/batch: decode + gather later vs decode +
//     scatter while hot, one thread (the comment above it says more).
//   BM_Memory_RecordCopy/window_mb/prefetch: shuffled 784-byte copies out of a window of that
//     size, with and without the gather's prefetch: what the gather pays for memory.
//
// Environment: SLUICE_FASHION_MNIST (default /usr/share/datasets/fashion-mnist).
#include <benchmark/benchmark.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_arena.h"
#include "pipeline/convert.h"
#include "pipeline/pipeline.h"
#include "pipeline/testing/order_planner.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "storage/idx.h"

namespace sluice {
namespace {

struct Fixture {
  std::string dir;
  std::unique_ptr<Dataset> dataset;
  std::vector<std::string> stored;  // every frame's stored bytes, in file order
  std::vector<std::string> raw;     // every frame decoded
  uint64_t records = 0;             // records in all frames (one pass over `stored`)
};

Fixture* Setup() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    const char* env = std::getenv("SLUICE_FASHION_MNIST");
    const std::string src = env ? env : "/usr/share/datasets/fashion-mnist";
    auto idx = ReadIdxPair(Env::Default(), src + "/train-images-idx3-ubyte.gz",
                           src + "/train-labels-idx1-ubyte.gz");
    if (!idx.ok()) {
      std::fprintf(stderr, "cannot read Fashion-MNIST from %s: %s\n", src.c_str(),
                   std::string(idx.status().message()).c_str());
      std::exit(1);
    }
    char tmpl[] = "/tmp/sluice-pipeline-bench-XXXXXX";
    fx->dir = mkdtemp(tmpl);
    WriteDatasetOptions o;
    o.sources = idx->sources;
    auto m = WriteDataset(Env::Default(), fx->dir, "train", idx->records, o);
    if (!m.ok()) {
      std::fprintf(stderr, "WriteDataset: %s\n", std::string(m.status().message()).c_str());
      std::exit(1);
    }
    fx->dataset = *Dataset::Open(Env::Default(), fx->dir);
    for (size_t s = 0; s < fx->dataset->manifest().shards.size(); ++s) {
      const ShardReader* r = *fx->dataset->shard(s);
      for (uint32_t i = 0; i < r->frame_count(); ++i) {
        fx->stored.emplace_back();
        (void)r->ReadStoredFrame(i, &fx->stored.back());
        fx->raw.emplace_back();
        (void)r->ReadFrame(i, &fx->raw.back());
        fx->records += r->frames()[i].record_count;
      }
    }
    std::atexit([] { std::filesystem::remove_all(Setup()->dir); });
    return fx;
  }();
  return f;
}

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Samples/s one thread decodes: bare ZSTD_decompressDCtx over every stored frame, from memory,
// after one warm-up pass, for about `seconds`.
double MeasureDecodeCeiling(double seconds) {
  Fixture* fx = Setup();
  size_t max_raw = 0;
  for (const std::string& r : fx->raw) max_raw = std::max(max_raw, r.size());
  std::string out(max_raw, '\0');
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  auto pass = [&] {
    for (size_t k = 0; k < fx->stored.size(); ++k) {
      const size_t n = ZSTD_decompressDCtx(dctx, out.data(), fx->raw[k].size(),
                                           fx->stored[k].data(), fx->stored[k].size());
      if (ZSTD_isError(n) || n != fx->raw[k].size()) {
        std::fprintf(stderr, "decode ceiling: zstd failed on frame %zu\n", k);
        std::exit(1);
      }
    }
    benchmark::DoNotOptimize(out.data());
  };
  pass();
  const Clock::time_point start = Clock::now();
  uint64_t passes = 0;
  double elapsed = 0;
  do {
    pass();
    ++passes;
    elapsed = SecondsSince(start);
  } while (elapsed < seconds);
  ZSTD_freeDCtx(dctx);
  return static_cast<double>(passes * fx->records) / elapsed;
}

// The process-wide ceiling (~0.3 s, measured once), for the single-thread stage benchmarks.
double DecodeCeiling() {
  static const double ceiling = MeasureDecodeCeiling(0.3);
  return ceiling;
}

// of_decode_limit (see the top of the file). The ceiling is measured twice, right before and
// right after the timed loop (with no pipeline alive), and averaged: on a shared VM one
// thread's decode rate moved 1.2-1.8 M samples/s between processes minutes apart, so a single
// measurement at start-up could put a pipeline that ran in a slow minute against a fast one.
// `ceiling_before`: from MeasureDecodeCeiling before the loop; `seconds`: the loop's wall time.
void SetDecodeLimitCounters(benchmark::State& state, uint64_t samples, double seconds, int threads,
                            double ceiling_before) {
  const double ceiling = (ceiling_before + MeasureDecodeCeiling(0.2)) / 2;
  state.counters["decode_ceiling"] = ceiling;
  state.counters["threads"] = threads;
  state.counters["of_decode_limit"] = static_cast<double>(samples) / seconds / (ceiling * threads);
}

// The benchmark names' format index (docs/benchmarks.md): 0 u8, 1 f16, 2 f32.
H2DFormat FormatArg(int64_t v) {
  constexpr H2DFormat kByIndex[] = {H2DFormat::kU8, H2DFormat::kF16, H2DFormat::kF32};
  return kByIndex[v];
}

void BM_Pipeline_EndToEnd(benchmark::State& state) {
  Fixture* fx = Setup();
  const double ceiling_before = MeasureDecodeCeiling(0.2);  // before the pipeline's threads start
  PipelineOptions o;
  o.format.h2d_format = FormatArg(state.range(0));
  o.order.batch_size = static_cast<uint32_t>(state.range(1));
  o.resources.threads = static_cast<int>(state.range(2));
  // pool_size: the default (auto), as sluice-train runs it
  o.resources.read_ahead_frames = 8;
  o.span.epochs = 1000;  // one pipeline over many epochs, as sluice-train runs it: steady state
  auto p = Pipeline::Create(fx->dataset.get(), o);
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  const uint64_t steps = (*p)->steps_per_epoch();
  uint64_t samples = 0, bytes = 0;
  BatchLease lease;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {  // one epoch per iteration
    for (uint64_t s = 0; s < steps; ++s) {
      absl::StatusOr<bool> got = (*p)->Next(&lease);
      if (!got.ok() || !*got) {
        state.SkipWithError("the pipeline ended early");
        return;
      }
      samples += lease.view().size;
      bytes += size_t{lease.view().size} * lease.view().sample.bytes();
      benchmark::DoNotOptimize(lease.view().samples);
    }
  }
  const double seconds = SecondsSince(start);
  lease.Release();
  p->reset();  // its threads stop before the second ceiling measurement
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  SetDecodeLimitCounters(state, samples, seconds, o.resources.threads, ceiling_before);
}
BENCHMARK(BM_Pipeline_EndToEnd)
    ->ArgNames({"format", "batch", "threads"})
    ->ArgsProduct({{0, 2}, {32, 256}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The comparison configuration of bench/compare_dataloader.sh: PyTorch's DataLoader defaults
// (no shuffle), ToTensor (f32), batch 32.
void BM_Pipeline_DataLoaderConfig(benchmark::State& state) {
  Fixture* fx = Setup();
  const double ceiling_before = MeasureDecodeCeiling(0.2);  // before the pipeline's threads start
  PipelineOptions o;
  o.order.batch_size = 32;
  o.order.shuffle = false;
  o.resources.threads = static_cast<int>(state.range(0));
  // pool_size: the default (auto), as sluice-train runs it
  o.resources.read_ahead_frames = 8;
  uint64_t samples = 0;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    auto p = Pipeline::Create(fx->dataset.get(), o);
    BatchLease lease;
    while (*(*p)->Next(&lease)) samples += lease.view().size;
  }
  const double seconds = SecondsSince(start);
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  SetDecodeLimitCounters(state, samples, seconds, o.resources.threads, ceiling_before);
}
BENCHMARK(BM_Pipeline_DataLoaderConfig)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Stage_Read(benchmark::State& state) {
  Fixture* fx = Setup();
  uint64_t bytes = 0, samples = 0;
  std::string buf;
  for (auto _ : state) {
    for (size_t s = 0; s < fx->dataset->manifest().shards.size(); ++s) {
      const ShardReader* r = *fx->dataset->shard(s);
      for (uint32_t i = 0; i < r->frame_count(); ++i) {
        (void)r->ReadStoredFrame(i, &buf);
        bytes += buf.size();
        samples += r->frames()[i].record_count;
      }
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Stage_Read)->Unit(benchmark::kMillisecond);

void BM_Stage_Decompress(benchmark::State& state) {
  Fixture* fx = Setup();
  std::vector<std::pair<const ShardReader*, uint32_t>> frames;
  for (size_t s = 0; s < fx->dataset->manifest().shards.size(); ++s) {
    const ShardReader* r = *fx->dataset->shard(s);
    for (uint32_t i = 0; i < r->frame_count(); ++i) frames.emplace_back(r, i);
  }
  std::vector<std::string> out(frames.size());
  for (size_t k = 0; k < frames.size(); ++k)
    out[k].resize(frames[k].first->frames()[frames[k].second].raw_size);
  oneapi::tbb::task_arena arena(static_cast<int>(state.range(0)));
  uint64_t bytes = 0;
  for (auto _ : state) {
    arena.execute([&] {
      oneapi::tbb::parallel_for(size_t{0}, frames.size(), [&](size_t k) {
        (void)frames[k].first->DecodeFrame(frames[k].second, fx->stored[k],
                                           absl::MakeSpan(out[k].data(), out[k].size()));
      });
    });
    for (const std::string& s : out) bytes += s.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * fx->dataset->record_count()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Stage_Decompress)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The fixture's frames as one split (frame k = fx.raw[k]; 785 bytes per record: 784 pixels
// and a u8 label), for the benchmarks that plan an epoch over the decoded frames in memory.
pipeline_testing::SplitLayout DecodedLayout(const Fixture& fx) {
  pipeline_testing::SplitLayout layout;
  uint64_t first = 0;
  for (size_t k = 0; k < fx.raw.size(); ++k) {
    const uint32_t n = static_cast<uint32_t>(fx.raw[k].size() / 785);
    layout.frames.push_back(pipeline_testing::FrameRef{0, static_cast<uint32_t>(k), first, n});
    first += n;
  }
  layout.record_count = first;
  return layout;
}

void BM_Stage_Preprocess(benchmark::State& state) {
  using namespace pipeline_testing;
  Fixture* fx = Setup();
  const H2DFormat format = FormatArg(state.range(0));
  const uint32_t batch = 256;
  const pipeline_testing::SplitLayout layout = DecodedLayout(*fx);
  EpochPlan plan = *PlanEpoch(layout, OrderOptions{1, true, 64, batch, false}, 0, 0);
  SampleConverter conv = *SampleConverter::Create(SampleDType::kU8, format, {}, 784);
  std::vector<char> out(size_t{batch} * conv.out_bytes_per_sample());
  std::vector<int32_t> labels(batch);
  uint64_t samples = 0;
  for (auto _ : state) {
    for (uint32_t b = 0; b < plan.num_batches(); ++b) {
      uint32_t k = 0;
      for (uint32_t i = plan.batch_begin(b); i < plan.batch_end(b); ++i, ++k) {
        const uint32_t g = plan.read_frames[plan.sample_slot[i]];
        const std::string& raw = fx->raw[g];
        const uint32_t n = layout.frames[g].record_count;
        conv.Convert(raw.data() + size_t{plan.sample_offset[i]} * 784,
                     out.data() + size_t{k} * conv.out_bytes_per_sample(), 1);
        ConvertLabels(LabelDType::kU8, raw.data() + size_t{n} * 784 + plan.sample_offset[i],
                      &labels[k], 1);
      }
      benchmark::DoNotOptimize(out.data());
      samples += k;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  state.SetBytesProcessed(static_cast<int64_t>(samples * conv.out_bytes_per_sample()));
}
BENCHMARK(BM_Stage_Preprocess)
    ->ArgName("format")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond);

// BM_Stage_DecodeAndAssemble/assemble/format/batch: one thread, one shuffled epoch (window 64
// frames), frames decoded in read order into recycled buffers (as many as the pipeline's frame
// budget), and the samples moved into batch buffers one of four ways:
//   0: not at all (decode only; of_decode_ceiling ~1 by construction);
//   1: gathered once a batch's last frame is decoded, from frames decoded long before, with the
//      pipeline's prefetch 4 records ahead (the pipeline's design);
//   2: scattered right after each frame is decoded, while it is hot, into the batch buffers of
//      every open batch (buffers for 20480 samples: the window's records and 4096 more);
//   3: scattered into one batch buffer (hot): the copy and conversion alone, no memory traffic.
// 2 against 1 is the question "copy records while their frame is hot instead of gathering
// them later?": both move the shuffle window's records (~13 MB at u8) through memory once,
// the gather on the read side, the scatter on the write side.
void BM_Stage_DecodeAndAssemble(benchmark::State& state) {
  using namespace pipeline_testing;
  Fixture* fx = Setup();
  const int assemble = static_cast<int>(state.range(0));
  const H2DFormat format = FormatArg(state.range(1));
  const uint32_t batch = static_cast<uint32_t>(state.range(2));
  const pipeline_testing::SplitLayout layout = DecodedLayout(*fx);
  const EpochPlan plan = *PlanEpoch(layout, OrderOptions{1, true, 64, batch, false}, 0, 0);
  RecordSpec fashion;  // 28x28 u8 samples, u8 labels (Fashion-MNIST's records)
  fashion.height = 28;
  fashion.width = 28;
  const SampleConverter conv = *SampleConverter::Create(fashion, format, {});
  const size_t ob = conv.out_bytes_per_sample();
  size_t max_raw = 0;
  for (const std::string& r : fx->raw) max_raw = std::max(max_raw, r.size());
  // Frames live in a ring of recycled buffers: as many as the pipeline's budget (read-ahead
  // 8), and at least as many as the slots any one batch spans, so that no frame a batch gathers
  // from has been overwritten yet (the pipeline frees frames by last use, not in ring order).
  uint32_t span = 0;
  for (uint32_t b = 0; b < plan.num_batches(); ++b) {
    const auto first_slot = plan.batch_slots.begin() + plan.batch_slot_begin[b];
    const auto last_slot = plan.batch_slots.begin() + plan.batch_slot_begin[b + 1];
    if (first_slot == last_slot) continue;
    const auto [lo, hi] = std::minmax_element(first_slot, last_slot);
    span = std::max(span, *hi - *lo + 1);
  }
  const uint32_t ring = std::max(plan.min_frames_alive, span) + 8;
  std::vector<std::vector<char>> frames(ring, std::vector<char>(max_raw, 0));
  // The pinned pool hands out the buffer returned last, so a pipeline whose consumer keeps
  // up cycles through a few; scattering needs one for every open batch.
  const uint32_t pool = assemble == 2 ? (16384 + 4096 + batch - 1) / batch : 4;
  std::vector<std::vector<char>> bufs(pool, std::vector<char>(size_t{batch} * (ob + 4)));
  struct Dst {
    uint32_t batch, place, offset;
  };
  std::vector<std::vector<Dst>> scatter(plan.read_frames.size());  // by slot
  for (uint32_t b = 0; b < plan.num_batches(); ++b) {
    for (uint32_t i = plan.batch_begin(b); i < plan.batch_end(b); ++i) {
      scatter[plan.sample_slot[i]].push_back(
          Dst{b, i - plan.batch_begin(b), plan.sample_offset[i]});
    }
  }
  auto record = [&](uint32_t slot, uint32_t offset) {
    return frames[slot % ring].data() + size_t{offset} * 784;
  };
  auto put = [&](uint32_t buffer, uint32_t place, uint32_t slot, uint32_t offset) {
    char* base = bufs[buffer].data();
    const FrameView frame(fashion, layout.frames[plan.read_frames[slot]].record_count,
                          frames[slot % ring].data());
    GatherRecord(conv, LabelDType::kU8, frame, offset, base + size_t{place} * ob,
                 reinterpret_cast<int32_t*>(base + size_t{batch} * ob) + place);
  };
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::vector<uint32_t> missing(plan.num_batches());
  uint64_t samples = 0;
  for (auto _ : state) {
    for (uint32_t b = 0; b < plan.num_batches(); ++b) {
      missing[b] = plan.batch_slot_begin[b + 1] - plan.batch_slot_begin[b];
    }
    for (uint32_t s = 0; s < plan.read_frames.size(); ++s) {
      const uint32_t g = plan.read_frames[s];
      const size_t n = ZSTD_decompressDCtx(dctx, frames[s % ring].data(), fx->raw[g].size(),
                                           fx->stored[g].data(), fx->stored[g].size());
      if (ZSTD_isError(n)) {
        state.SkipWithError("zstd failed");
        break;
      }
      if (assemble == 0) {
        samples += layout.frames[g].record_count;
      } else if (assemble == 1) {
        for (uint32_t j = plan.slot_batch_begin[s]; j < plan.slot_batch_begin[s + 1]; ++j) {
          const uint32_t b = plan.slot_batches[j];
          if (--missing[b] != 0) continue;
          for (uint32_t i = plan.batch_begin(b); i < plan.batch_end(b); ++i) {
            if (i + 4 < plan.batch_end(b)) {
              const char* p = record(plan.sample_slot[i + 4], plan.sample_offset[i + 4]);
              for (size_t line = 0; line < 784; line += 64) __builtin_prefetch(p + line);
            }
            put(b % pool, i - plan.batch_begin(b), plan.sample_slot[i], plan.sample_offset[i]);
          }
          samples += plan.batch_end(b) - plan.batch_begin(b);
        }
      } else {
        for (const Dst& d : scatter[s])
          put(assemble == 3 ? 0 : d.batch % pool, d.place, s, d.offset);
        samples += scatter[s].size();
      }
    }
    benchmark::DoNotOptimize(bufs[0].data());
  }
  ZSTD_freeDCtx(dctx);
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  state.counters["of_decode_ceiling"] = benchmark::Counter(
      static_cast<double>(samples) / DecodeCeiling(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Stage_DecodeAndAssemble)
    ->ArgNames({"assemble", "format", "batch"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 2}, {32, 256}})
    ->Unit(benchmark::kMillisecond);

// BM_Memory_RecordCopy/window_mb/prefetch: the gather's memory cost alone. 784-byte records
// copied in a shuffled order out of a window of `window_mb` MB (as the gather reads a shuffle
// window of decoded frames) into a few rotating batch buffers, with or without the prefetch of
// the record 4 places ahead that PipelineCore::GatherInto issues. Items = records.
void BM_Memory_RecordCopy(benchmark::State& state) {
  const size_t window = static_cast<size_t>(state.range(0)) << 20;
  const bool prefetch = state.range(1) != 0;
  constexpr size_t kRecord = 784;
  constexpr uint32_t kAhead = 4;
  std::vector<char> src(window, 1);
  std::vector<char> dst(size_t{256} * kRecord * 4, 0);  // four batch-256 buffers
  std::vector<uint32_t> order(window / kRecord);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(1));
  const size_t slots = dst.size() / kRecord;
  uint64_t n = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < order.size(); ++i, ++n) {
      if (prefetch && i + kAhead < order.size()) {
        const char* p = src.data() + size_t{order[i + kAhead]} * kRecord;
        for (size_t line = 0; line < kRecord; line += 64) __builtin_prefetch(p + line);
      }
      std::memcpy(dst.data() + (n % slots) * kRecord, src.data() + size_t{order[i]} * kRecord,
                  kRecord);
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.SetBytesProcessed(static_cast<int64_t>(n * kRecord));
}
BENCHMARK(BM_Memory_RecordCopy)
    ->ArgNames({"window_mb", "prefetch"})
    ->ArgsProduct({{1, 4, 14, 64}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
