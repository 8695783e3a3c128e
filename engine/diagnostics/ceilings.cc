#include "engine/diagnostics/ceilings.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/build_id.h"
#include "common/checksum.h"
#include "common/cpu_load.h"
#include "common/json_fields.h"
#include "common/status_macros.h"
#include "engine/backend_factory.h"
#include "engine/diagnostics/internal/ceilings_internal.h"
#include "pipeline/batch_format.h"
#include "pipeline/convert.h"
#include "pipeline/pinned_buffer_pool.h"
#include "pipeline/stage_stats.h"
#include "pipeline/transforms/transform_chain.h"

namespace sluice {

namespace {

constexpr size_t kMaxFrames = 8;

// Runs `body` (one unit of work, returning the units' bytes) at least once and until
// `seconds` have passed. Returns {calls, bytes, elapsed ns}.
struct Timed {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  int64_t ns = 0;
};
template <typename F>
Timed TimeLoop(double seconds, F&& body) {
  Timed t;
  const int64_t start = NowNs();
  const int64_t until = start + static_cast<int64_t>(seconds * 1e9);
  do {
    t.bytes += body(t.calls);
    ++t.calls;
    t.ns = NowNs() - start;
  } while (NowNs() < until);
  return t;
}

Ceiling FromTimed(const Timed& t, double samples_per_call, std::string note) {
  Ceiling c;
  const double s = std::max<int64_t>(t.ns, 1) / 1e9;
  c.measured = true;
  c.mb_per_s = t.bytes / 1e6 / s;
  c.items_per_s = t.calls / s;
  c.samples_per_s = t.calls * samples_per_call / s;
  c.note = std::move(note);
  return c;
}

struct Frame {
  const ShardReader* reader;
  uint32_t index;
  std::string stored;
  std::string raw;
};

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string Sanitize(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return out;
}

}  // namespace

namespace {

// The first frames of the dataset (at most kMaxFrames), stored and decoded.
absl::StatusOr<std::vector<Frame>> LoadFrames(const Dataset& dataset) {
  std::vector<Frame> frames;
  for (size_t s = 0; s < dataset.manifest().shards.size() && frames.size() < kMaxFrames; ++s) {
    ASSIGN_OR_RETURN(const ShardReader* reader, dataset.shard(s));
    for (uint32_t i = 0; i < reader->frame_count() && frames.size() < kMaxFrames; ++i) {
      Frame f{reader, i, {}, {}};
      RETURN_IF_ERROR(reader->ReadStoredFrame(i, &f.stored));
      f.raw.resize(reader->frames()[i].raw_size);
      RETURN_IF_ERROR(reader->DecodeFrame(i, f.stored, absl::MakeSpan(f.raw)));
      frames.push_back(std::move(f));
    }
  }
  if (frames.empty()) return absl::InvalidArgumentError("the dataset has no frames to measure");
  return frames;
}

double MeanRecords(const std::vector<Frame>& frames) {
  double mean = 0;
  for (const Frame& f : frames) mean += f.reader->frames()[f.index].record_count;
  return mean / static_cast<double>(frames.size());
}

// One stored record to one batch sample as the run's pipeline makes it: through the run's
// transform chain (ChainPreprocessor) when it has one, else the SampleConverter; the h2d
// format resolved as the pipeline resolves it (--h2d-format=auto with a chain that outputs
// floats takes their format).
class BatchSampleMaker {
 public:
  // `bound`: the dataset's largest image (its manifest), which sizes a decoding chain's scratch.
  static absl::StatusOr<BatchSampleMaker> Create(const RecordSpec& spec, const BatchFormat& format,
                                                 const std::optional<ImageSizeBound>& bound) {
    BatchSampleMaker m;
    m.spec_ = spec;
    ASSIGN_OR_RETURN(m.format_, ResolveBatchFormat(spec, format, SettingNames::kFlags, bound));
    if (m.format_.chain != nullptr) {
      ASSIGN_OR_RETURN(ChainPreprocessor pre,
                       ChainPreprocessor::Create(spec, m.format_, format.normalization));
      m.chain_.emplace(std::move(pre));
      // Not zero-filled: a chain over encoded images sizes it for the largest image.
      m.scratch_.reset(new char[m.chain_->scratch_bytes() + kScratchAlign]);
    } else {
      ASSIGN_OR_RETURN(SampleConverter conv,
                       SampleConverter::Create(spec, m.format_.h2d_format, format.normalization));
      m.converter_.emplace(std::move(conv));
    }
    return m;
  }

  H2DFormat h2d_format() const { return format_.h2d_format; }
  const SampleSpec& out_spec() const { return format_.sample; }
  size_t out_bytes() const { return format_.sample.bytes(); }
  // What a sample goes through, for the ceilings' notes.
  std::string Describe() const {
    if (chain_.has_value()) {
      return absl::StrCat("the run's transforms (", chain_->chain().Identity(), ") to ",
                          H2DFormatName(h2d_format()));
    }
    return absl::StrCat("SampleConverter (", H2DFormatName(h2d_format()), ")");
  }

  // Record `offset` of `frame` into `out` and `label`; `index` keys the chain's random draws.
  // A record the chain refuses (a corrupt image) leaves `out` as it was: the ceiling times the
  // work the run would do, and the run reports the record.
  void Make(const FrameView& frame, uint32_t offset, uint64_t index, char* out, int32_t* label) {
    if (chain_.has_value()) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(scratch_.get());
      char* aligned = scratch_.get() + (kScratchAlign - at % kScratchAlign) % kScratchAlign;
      chain_
          ->Process(frame.sample(offset), frame.sample_size(offset), out, SampleKey{0, 0, index},
                    aligned, nullptr)
          .IgnoreError();
      ConvertLabels(spec_.label_dtype, frame.label(offset), label, 1);
    } else {
      GatherRecord(*converter_, spec_.label_dtype, frame, offset, out, label);
    }
  }

 private:
  static constexpr size_t kScratchAlign = 64;
  RecordSpec spec_;
  ResolvedBatchFormat format_;
  std::optional<ChainPreprocessor> chain_;
  std::optional<SampleConverter> converter_;
  std::unique_ptr<char[]> scratch_;
};

Ceiling MeasureRead(const std::vector<Frame>& frames, double secs) {
  std::string scratch;
  return FromTimed(TimeLoop(secs,
                            [&](uint64_t k) -> uint64_t {
                              const Frame& f = frames[k % frames.size()];
                              if (!f.reader->ReadStoredFrame(f.index, &scratch).ok()) return 0;
                              return scratch.size();
                            }),
                   MeanRecords(frames),
                   "ShardReader::ReadStoredFrame (pread via the Env), 1 thread, page cache "
                   "warm; MB of stored frames");
}

Ceiling MeasureDecompress(const std::vector<Frame>& frames, double secs) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::string raw;
  Ceiling c = FromTimed(
      TimeLoop(secs,
               [&](uint64_t k) -> uint64_t {
                 const Frame& f = frames[k % frames.size()];
                 raw.resize(f.raw.size());
                 if (!f.reader->DecodeFrame(f.index, f.stored, absl::MakeSpan(raw), dctx).ok()) {
                   return 0;
                 }
                 return raw.size();
               }),
      MeanRecords(frames),
      "ShardReader::DecodeFrame (XXH3 check + zstd) per thread; MB of "
      "raw output");
  ZSTD_freeDCtx(dctx);
  return c;
}

// Decode: the run's decoder (the chain's first op, DecodeImage: libjpeg-turbo or libspng) on
// the measured frames' encoded images in turn, 1 thread; what one core decodes of this dataset.
// Not measured when the records are not encoded images.
absl::StatusOr<Ceiling> MeasureDecode(const Dataset& dataset, const std::vector<Frame>& frames,
                                      const CeilingOptions& options, double secs) {
  ASSIGN_OR_RETURN(const ResolvedBatchFormat format,
                   ResolveBatchFormat(dataset.spec(), options.format, SettingNames::kFlags,
                                      dataset.manifest().image_bound));
  Ceiling none;
  if (format.chain == nullptr || !format.chain->decodes()) {
    none.note = "not measured: the records are not encoded images";
    return none;
  }
  const TransformChain& chain = *format.chain;
  struct Image {
    const char* bytes;
    size_t size;
  };
  std::vector<Image> images;
  for (const Frame& f : frames) {
    const uint32_t n = f.reader->frames()[f.index].record_count;
    const FrameView view(dataset.spec(), n, f.raw.data());
    for (uint32_t r = 0; r < n; ++r) images.push_back({view.sample(r), view.sample_size(r)});
  }
  std::vector<char> out(chain.spec(1).bytes());
  std::vector<char> scratch(chain.scratch_bytes() + 64);
  char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  // A corrupt image costs its failed attempt, as in the run; it decodes no bytes.
  const auto whole = [&](uint64_t k) -> uint64_t {
    const Image& im = images[k % images.size()];
    absl::StatusOr<SampleSpec> s = chain.DecodeRecord(im.bytes, im.size, out.data(), aligned);
    return s.ok() ? s->bytes() : 0;
  };
  const std::string what = absl::StrCat(chain.op(0).Identity(), " on the dataset's first ",
                                        images.size(), " images in turn, 1 thread");
  if (!chain.decodes_windows()) {
    return FromTimed(TimeLoop(secs, whole), 1, absl::StrCat(what, "; MB of decoded pixels"));
  }
  // The run decodes only the crops' windows of its JPEGs: the ceiling decodes them alike (the
  // windows of sample keys 0, 1, 2, ...), so that the run's decode is compared with what it
  // does; the whole decode, the reference, is given in the note.
  Ceiling c = FromTimed(TimeLoop(secs / 2,
                                 [&](uint64_t k) -> uint64_t {
                                   const Image& im = images[k % images.size()];
                                   absl::StatusOr<uint64_t> bytes = chain.DecodeAsRun(
                                       im.bytes, im.size, out.data(), SampleKey{0, 0, k}, aligned);
                                   return bytes.ok() ? *bytes : 0;
                                 }),
                        1, "");
  const Ceiling reference = FromTimed(TimeLoop(secs / 2, whole), 1, "");
  c.note = absl::StrFormat(
      "%s, only the windows the crop keeps (as the run decodes them); MB of pixels decoded. The "
      "whole decode of the same images: %.0f images/s (%.1f MB/s of pixels)",
      what, reference.items_per_s, reference.mb_per_s);
  return c;
}

// Preprocess: the pipeline's own gather + convert of one batch (through the run's transforms
// when it has them), into a page-aligned buffer; samples are taken with a stride so the gather
// touches every measured frame. Then a plain memcpy of a batch into such a buffer.
absl::Status MeasurePreprocessAndMemcpy(const Dataset& dataset, const std::vector<Frame>& frames,
                                        const CeilingOptions& options, double secs,
                                        Ceiling* preprocess, Ceiling* memcpy_ceiling) {
  const RecordSpec& spec = dataset.spec();
  ASSIGN_OR_RETURN(BatchSampleMaker maker,
                   BatchSampleMaker::Create(spec, options.format, dataset.manifest().image_bound));
  const size_t out_bytes = maker.out_bytes();
  const uint32_t batch = options.batch_size;
  const size_t batch_bytes = out_bytes * batch + 4 * size_t{batch};
  ASSIGN_OR_RETURN(auto pool, PinnedBufferPool::Create(2, batch_bytes));
  PinnedBuffer dst = pool->Acquire();
  PinnedBuffer src = pool->Acquire();
  std::memset(src.data(), 1, batch_bytes);
  uint64_t cursor = 0;
  *preprocess = FromTimed(
      TimeLoop(secs,
               [&](uint64_t) -> uint64_t {
                 int32_t* labels = reinterpret_cast<int32_t*>(dst.data() + out_bytes * batch);
                 for (uint32_t i = 0; i < batch; ++i, cursor += 7) {
                   const Frame& f = frames[cursor % frames.size()];
                   const uint32_t n = f.reader->frames()[f.index].record_count;
                   const uint32_t off = static_cast<uint32_t>((cursor / frames.size()) % n);
                   maker.Make(FrameView(spec, n, f.raw.data()), off, cursor,
                              dst.data() + i * out_bytes, labels + i);
                 }
                 return batch_bytes;
               }),
      batch,
      absl::StrCat("the pipeline's gather + ", maker.Describe(),
                   " of one batch per call, 1 thread; MB of batch output"));
  *memcpy_ceiling =
      FromTimed(TimeLoop(secs,
                         [&](uint64_t) -> uint64_t {
                           std::memcpy(dst.data(), src.data(), batch_bytes);
                           return batch_bytes;
                         }),
                batch,
                absl::StrCat("memcpy of one batch into a ",
                             pool->pinned() ? "pinned" : "page-aligned", " host buffer, 1 thread"));
  return absl::OkStatus();
}

// Batches of the dataset's real samples (every record of the measured frames, in order, cut
// into batches of `batch_size`; at least one batch), converted to the h2d format: what the
// compute ceiling trains on, so the backend takes the paths real data takes (e.g. the CPU
// backend's sparse first layer, whose cost follows each batch's density).
absl::StatusOr<std::vector<BatchView>> RealBatches(const Dataset& dataset,
                                                   const std::vector<Frame>& frames,
                                                   const CeilingOptions& options,
                                                   std::vector<char>* samples,
                                                   std::vector<int32_t>* labels) {
  const RecordSpec& spec = dataset.spec();
  ASSIGN_OR_RETURN(BatchSampleMaker maker,
                   BatchSampleMaker::Create(spec, options.format, dataset.manifest().image_bound));
  const uint32_t batch = options.batch_size;
  uint64_t records = 0;
  for (const Frame& f : frames) records += f.reader->frames()[f.index].record_count;
  const uint64_t count = std::max<uint64_t>(1, records / batch);
  const size_t out = maker.out_bytes();
  samples->assign(out * batch * count, 0);
  labels->assign(batch * count, 0);
  uint64_t k = 0;
  for (size_t f = 0; k < batch * count; f = (f + 1) % frames.size()) {
    const Frame& fr = frames[f];
    const uint32_t n = fr.reader->frames()[fr.index].record_count;
    for (uint32_t r = 0; r < n && k < batch * count; ++r, ++k) {
      maker.Make(FrameView(spec, n, fr.raw.data()), r, k, samples->data() + k * out,
                 labels->data() + k);
    }
  }
  std::vector<BatchView> views(count);
  for (uint64_t i = 0; i < count; ++i) {
    views[i].samples = samples->data() + i * batch * out;
    views[i].labels = labels->data() + i * batch;
    views[i].sample = maker.out_spec();
    if (maker.h2d_format() == H2DFormat::kU8 && !options.format.normalization.is_identity()) {
      views[i].normalization = &options.format.normalization;
    }
    views[i].size = batch;
  }
  return views;
}

}  // namespace

absl::StatusOr<Ceilings> Ceilings::Measure(const Dataset& dataset, const CeilingOptions& options) {
  // A ceiling is the stage alone on idle cores: measured while other processes held a core,
  // it understates the stage (a compute ceiling of 83 k samples/s measured so, 206 k on a
  // quiet machine minutes later). Measure again once, and keep the quieter of the two.
  ASSIGN_OR_RETURN(Ceilings c, MeasureOnce(dataset, options));
  if (c.other_cores_busy >= kBusyMachineCores) {
    ASSIGN_OR_RETURN(Ceilings again, MeasureOnce(dataset, options));
    if (again.other_cores_busy < c.other_cores_busy) c = std::move(again);
  }
  return c;
}

absl::StatusOr<Ceilings> Ceilings::MeasureOnce(const Dataset& dataset,
                                               const CeilingOptions& options) {
  if (options.batch_size == 0) return absl::InvalidArgumentError("batch_size must be >= 1");
  const CpuLoadSnapshot load_before = TakeCpuLoadSnapshot();
  Ceilings c;
  c.hostname = Hostname();
  c.build = BuildId();
  c.key = CacheKey(dataset, options);
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  c.measured_at = when;
  const double secs = options.seconds_per_measurement;

  ASSIGN_OR_RETURN(const std::vector<Frame> frames, LoadFrames(dataset));
  c.read = MeasureRead(frames, secs);
  c.decompress = MeasureDecompress(frames, secs);
  ASSIGN_OR_RETURN(c.decode, MeasureDecode(dataset, frames, options, secs));
  RETURN_IF_ERROR(
      MeasurePreprocessAndMemcpy(dataset, frames, options, secs, &c.preprocess, &c.pinned_memcpy));
  ASSIGN_OR_RETURN(const ResolvedBatchFormat format,
                   ResolveBatchFormat(dataset.spec(), options.format, SettingNames::kFlags));
  const size_t sample_bytes = size_t{options.batch_size} * format.sample.bytes();
  ceilings_internal::MeasureH2D(options, sample_bytes, 4 * size_t{options.batch_size},
                                options.batch_size, secs, &c.h2d_pinned, &c.h2d_pageable);
  if (options.measure_compute) {
    std::vector<char> samples;
    std::vector<int32_t> labels;
    ASSIGN_OR_RETURN(std::vector<BatchView> batches,
                     RealBatches(dataset, frames, options, &samples, &labels));
    RETURN_IF_ERROR(ceilings_internal::MeasureCompute(options, batches, secs, &c.compute));
  } else {
    c.compute.note = "not measured: disabled";
  }
  c.other_cores_busy = OtherCoresBusy(load_before, TakeCpuLoadSnapshot()).value_or(0);
  return c;
}

std::string Ceilings::CacheKey(const Dataset& dataset, const CeilingOptions& options) {
  // Everything else that changes a ceiling (the compute ceiling mostly): the backend's threads,
  // precision and graphs, the optimizer and its hyper-parameters, the normalization, the sim
  // device's model, and how long a measurement runs.
  const OptimizerConfig& o = options.optimizer;
  const BackendSpec& b = options.backend;
  // The batches as the run makes them: the h2d format after --h2d-format=auto (a format that
  // does not resolve fails Measure; the setting keys it), and the chain by its canonical
  // identity.
  absl::StatusOr<ResolvedBatchFormat> format =
      ResolveBatchFormat(dataset.spec(), options.format, SettingNames::kFlags);
  const H2DFormat h2d = format.ok() ? format->h2d_format : options.format.h2d_format;
  const std::string& transforms = options.format.transforms.identity();
  const std::string settings = absl::StrCat(
      "threads=", b.cpu.threads, ";precision=", static_cast<int>(b.options.precision),
      ";graph=", b.cuda.cuda_graph, ";ordinal=", b.device.ordinal_or(0),
      ";opt=", static_cast<int>(o.kind), ",", o.lr, ",", o.momentum, ",", o.nesterov, ",",
      o.weight_decay, ",", o.beta1, ",", o.beta2, ",", o.eps,
      ";norm=", absl::StrJoin(options.format.normalization.mean, ","), "/",
      absl::StrJoin(options.format.normalization.std, ","), ";sim=", b.sim.device.link_bytes_per_s,
      ",", b.sim.device.link_latency_ns, ",", b.sim.compute_ns_per_step, ",",
      b.sim.compute_samples_per_s, ";secs=", options.seconds_per_measurement,
      ";compute=", options.measure_compute, ";transforms=", transforms,
      // The decode ceiling decodes as the run does: windows, or whole images with
      // SLUICE_WINDOW_DECODE=0 (a run of either read the other's ceiling and note).
      ";window_decode=", WindowDecodeEnabled(),
      // The code that measures: each build keeps its own file, so two builds sharing a
      // cache directory do not keep re-measuring over each other.
      ";build=", BuildId());
  return Sanitize(absl::StrCat(
      Hostname(), "_", ChecksumToHex(Xxh3(dataset.manifest().ToJson())), "_b", options.batch_size,
      "_", H2DFormatName(h2d), "_", options.backend.device.ToString(), "_",
      absl::StrJoin(options.model.layers, "x"), "_", ChecksumToHex(Xxh3(settings))));
}

namespace {

// Other processes' use of this process's cores over the next tenth of a second (0 when it
// cannot be read).
double OtherCoresBusyNow() {
  const CpuLoadSnapshot before = TakeCpuLoadSnapshot();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return OtherCoresBusy(before, TakeCpuLoadSnapshot()).value_or(0);
}

}  // namespace

absl::StatusOr<Ceilings> Ceilings::LoadOrMeasure(Env* env, const Dataset& dataset,
                                                 const CeilingOptions& options) {
  const std::string key = CacheKey(dataset, options);
  const std::string path =
      CachePath(options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir, key);
  if (!options.refresh && env->FileExists(path)) {
    absl::StatusOr<Ceilings> cached = Load(env, path);
    // Else stale, corrupt, or measured by another build of this code (whose figures, the
    // compute ceiling above all, need not hold for this one; the key names the build too,
    // this checks the file's own word): re-measure.
    // A file measured on a busy machine (other processes held kBusyMachineCores or more) is
    // measured again when the machine is quieter now (a tenth of a second's look): the stage
    // alone was not what it measured. On a machine that stays busy, or for a run that must
    // not measure (cached_only), it is used as it is; the report notes that it understates.
    if (cached.ok() && cached->key == key && cached->build == BuildId() &&
        (cached->other_cores_busy < kBusyMachineCores || options.cached_only ||
         OtherCoresBusyNow() >= cached->other_cores_busy - kBusyMachineCores / 2)) {
      return cached;
    }
  }
  if (options.cached_only) {
    return absl::FailedPreconditionError(absl::StrCat("no cached ceilings in ", path));
  }
  ASSIGN_OR_RETURN(Ceilings c, Measure(dataset, options));
  RETURN_IF_ERROR(c.Save(env, path));
  return c;
}

}  // namespace sluice
