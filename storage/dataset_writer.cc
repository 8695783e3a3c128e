#include "storage/dataset_writer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/coding.h"
#include "common/file_lock.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/frame_view.h"
#include "storage/image_structure.h"
#include "storage/shard_writer.h"

namespace sluice {
namespace {

// A frame to compress: shard `shard`, frame `frame`, global records [first, first + count),
// `raw_size` raw bytes.
struct FrameJob {
  uint32_t shard;
  uint32_t frame;
  uint64_t first;
  uint32_t count;
  uint32_t raw_size;
};

// The frames of a split, planned before any byte is written: the manifest's shard entries
// (first_record, record_count, frame_count), the jobs in shard and frame order, and the header
// fields every shard shares.
struct SplitPlan {
  Manifest manifest;
  std::vector<FrameJob> jobs;
  std::vector<uint32_t> max_sample_bytes;  // per shard; encoded records only
};

// Writes a frame's raw bytes (the FrameView layout) of `job` into `raw` (cleared first).
using AssembleFrame = std::function<void(const FrameJob& job, std::string* raw)>;

}  // namespace

namespace {

// The checks of every write of fixed-size records: the split's name, the count, the shape, the
// sizes of the samples (`sample_bytes` given) and labels, and the options.
absl::Status ValidateRecords(const std::string& split, const RecordSpec& s, uint64_t count,
                             uint64_t sample_bytes, uint64_t label_bytes,
                             const ShardingOptions& o) {
  RETURN_IF_ERROR(CheckSplitName(split));
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("split ", split, ": zero records; a shard holds at least one"));
  }
  if (s.height == 0 || s.width == 0 || s.channels == 0) {
    return absl::InvalidArgumentError(absl::StrCat("sample shape ", s.height, "x", s.width, "x",
                                                   s.channels, ": expected each >= 1"));
  }
  if (sample_bytes != count * s.sample_bytes() || label_bytes != count * s.label_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("records: expected ", count * s.sample_bytes(),
                                                   " sample bytes and ", count * s.label_bytes(),
                                                   " label bytes for ", count, " records, got ",
                                                   sample_bytes, " and ", label_bytes));
  }
  if (o.records_per_frame == 0 || o.records_per_shard == 0) {
    return absl::InvalidArgumentError("records per frame and per shard must be >= 1");
  }
  if ((count + o.records_per_shard - 1) / o.records_per_shard > UINT32_MAX) {
    return absl::InvalidArgumentError("too many shards; raise --records-per-shard");
  }
  if (o.zstd_level < 1 || o.zstd_level > ZSTD_maxCLevel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("zstd level ", o.zstd_level, ": expected 1..", ZSTD_maxCLevel()));
  }
  return absl::OkStatus();
}

// The most records one frame of a fixed-size split holds: M, but no more than a shard or the
// whole split holds.
uint64_t FrameRecordsAtMost(const ShardingOptions& o, uint64_t count) {
  return std::min({uint64_t{o.records_per_frame}, o.records_per_shard, count});
}

// A frame's raw size is a u32 (docs/formats/shard.md): the largest frame must fit in 2^32 - 1
// bytes. Counted from the records a frame really holds: 2 records of 20 MB were refused as
// "256 records ... per frame".
absl::Status CheckFrameBytes(const RecordSpec& s, uint64_t count, const ShardingOptions& o,
                             const ShardingOptionNames& names) {
  const uint64_t most = FrameRecordsAtMost(o, count);
  const uint64_t record = s.record_bytes();
  uint64_t bytes = 0;
  if (!__builtin_mul_overflow(most, record, &bytes) && bytes <= UINT32_MAX) {
    return absl::OkStatus();
  }
  if (record > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one record of ", record, " bytes (", s.height, "x", s.width, "x", s.channels,
        " samples) exceeds the 4 GiB frame limit (a frame's raw size is at most 2^32 - 1 "
        "bytes): such records cannot be stored"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      most, " records of ", record, " bytes per frame exceed the 4 GiB frame limit; lower ",
      names.records_per_frame, " (at most ", UINT32_MAX / record, " records of this size)"));
}

// The sharding options a fixed-size split is stored with: M lowered to the most records a
// frame holds when M records would exceed 2^32 - 1 bytes (every reader checks M x record size
// from the shard header); else as given, so other splits are written byte for byte as before.
ShardingOptions StoredShardingOptions(const RecordSpec& s, uint64_t count, ShardingOptions o) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(uint64_t{o.records_per_frame}, uint64_t{s.record_bytes()}, &bytes) ||
      bytes > UINT32_MAX) {
    o.records_per_frame = static_cast<uint32_t>(FrameRecordsAtMost(o, count));
  }
  return o;
}

absl::Status ValidateInput(const std::string& split, const RecordArrays& r,
                           const ShardingOptions& o) {
  return ValidateRecords(split, r.spec, r.count, r.samples.size(), r.labels.size(), o);
}

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsLowerHex16(absl::string_view s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// True for the files a write of `split` creates besides its manifest: "<split>-<digits>.shard",
// "<split>-<digits>-<16 hex>.shard", either with ".tmp", and "<split>.manifest.json.tmp"
// (docs/formats/shard.md, "Atomicity and rewriting a split").
bool IsShardOrTempOfSplit(absl::string_view name, absl::string_view split) {
  if (name == ManifestFileName(split) + ".tmp") return true;
  if (!absl::ConsumePrefix(&name, split) || !absl::ConsumePrefix(&name, "-")) return false;
  absl::ConsumeSuffix(&name, ".tmp");
  if (!absl::ConsumeSuffix(&name, kShardSuffix)) return false;
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos) return IsDigits(name);
  return IsDigits(name.substr(0, dash)) && IsLowerHex16(name.substr(dash + 1));
}

// A shard file being written under its temporary name, its frames appended in order as their
// windows are made (FrameWindows).
struct OpenShard {
  std::unique_ptr<WritableFile> file;
  std::unique_ptr<ShardWriter> writer;  // writes into `file`

  // Writes the index and footer, fsyncs and closes the file; fills entry->bytes, entry->xxh3
  // and entry->meta_xxh3.
  absl::Status Finish(ShardEntry* entry) {
    RETURN_IF_ERROR(writer->Finish());
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(file->Close());
    entry->bytes = writer->bytes_written();
    entry->xxh3 = writer->file_checksum();
    entry->meta_xxh3 = writer->meta_checksum();
    return absl::OkStatus();
  }
};

absl::StatusOr<OpenShard> StartShardFile(Env* env, const std::string& tmp,
                                         const ShardHeader& header) {
  OpenShard shard;
  ASSIGN_OR_RETURN(shard.file, env->NewTemporaryFile(tmp));
  shard.writer = std::make_unique<ShardWriter>(shard.file.get(), header);
  return shard;
}

int64_t LabelAt(LabelDType type, absl::string_view labels, uint64_t i) {
  if (type == LabelDType::kU8) return static_cast<uint8_t>(labels[i]);
  return static_cast<int32_t>(DecodeFixed32(labels.data() + 4 * i));
}

// CheckLabels over `count` labels of type `type`, back to back in `labels`.
absl::StatusOr<uint32_t> CheckLabelValues(LabelDType type, absl::string_view labels, uint64_t count,
                                          std::optional<uint64_t> requested) {
  const uint64_t most = type == LabelDType::kU8 ? 256 : INT32_MAX;
  if (requested && (*requested == 0 || *requested > most)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_classes ", *requested, ": expected in [1, ", most, "] for ", LabelDTypeName(type),
        " labels",
        type == LabelDType::kU8 && *requested > most
            ? " (u8 labels declare at most 256 classes: give the labels as int32, e.g. a .npy "
              "of '<i4', for more)"
            : ""));
  }
  if (labels.size() != count * LabelDTypeSize(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: ", labels.size(), " bytes, expected ", count * LabelDTypeSize(type)));
  }
  int64_t max_label = -1;
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t label = LabelAt(type, labels, i);
    if (label < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("label of record ", i, " is ", label, ": expected a class index >= 0"));
    }
    if (requested && static_cast<uint64_t>(label) >= *requested) {
      return absl::InvalidArgumentError(absl::StrCat("label of record ", i, " is ", label,
                                                     ": expected a class index in [0, ", *requested,
                                                     ") (num_classes ", *requested, ")"));
    }
    // 2^31 - 1 fits an i32 label, but num_classes would then be 2^31, past its bound: name the
    // record here rather than refuse "num_classes 2147483648" later.
    if (label > kMaxLabel) {
      return absl::InvalidArgumentError(
          absl::StrCat("label of record ", i, " is ", label, ": the largest label is ", kMaxLabel,
                       " (2^31 - 2: num_classes, the largest label + 1, is at most 2^31 - 1)"));
    }
    max_label = std::max(max_label, label);
  }
  if (requested) return static_cast<uint32_t>(*requested);
  return static_cast<uint32_t>(max_label + 1);
}

// Records per class of `count` labels below num_classes (checked by CheckLabelValues), or none
// when there are more classes than a manifest counts.
std::vector<uint64_t> CountClasses(LabelDType type, absl::string_view labels, uint64_t count,
                                   std::optional<uint32_t> num_classes) {
  if (!num_classes || *num_classes > kMaxCountedClasses) return {};
  std::vector<uint64_t> counts(*num_classes, 0);
  for (uint64_t i = 0; i < count; ++i) ++counts[static_cast<size_t>(LabelAt(type, labels, i))];
  return counts;
}

// "record 7 (cats/x.jpg)", or "record 7" when the records carry no names.
std::string RecordName(const EncodedRecords& r, uint64_t i) {
  if (i < r.names.size()) return absl::StrCat("record ", i, " (", r.names[i], ")");
  return absl::StrCat("record ", i);
}

// The spec of encoded records: every sample a JPEG or PNG of 1..kMaxEncodedSampleBytes bytes;
// the encoding is that of all of them, or kImage for a mix. Also checks the options that apply.
absl::StatusOr<RecordSpec> ValidateEncodedInput(const std::string& split, const EncodedRecords& r,
                                                const ShardingOptions& o) {
  RecordArrays shape_free;  // ValidateInput's name, count and frame checks, on a 1-byte shape
  shape_free.spec = RecordSpec{.height = 1, .width = 1, .channels = 1};
  shape_free.spec.label_dtype = r.label_dtype;
  shape_free.count = r.samples.size();
  shape_free.samples.resize(r.samples.size());
  shape_free.labels = r.labels;
  if (!r.names.empty() && r.names.size() != r.samples.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.names.size(), " record names for ", r.samples.size(), " records"));
  }
  ShardingOptions checked = o;
  checked.records_per_frame = 1;  // a frame's size is bounded by frame_bytes instead
  if (o.codec == FrameCodec::kNone) checked.zstd_level = 1;  // unused
  RETURN_IF_ERROR(ValidateInput(split, shape_free, checked));
  if (o.records_per_frame == 0) {
    return absl::InvalidArgumentError("records per frame must be >= 1");
  }
  if (o.frame_bytes == 0 || o.frame_bytes > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame bytes ", o.frame_bytes, ": expected in [1, 2^31]"));
  }
  RecordSpec spec;
  spec.label_dtype = r.label_dtype;
  spec.height = spec.width = spec.channels = 0;
  for (uint64_t i = 0; i < r.samples.size(); ++i) {
    const std::string& sample = r.samples[i];
    if (sample.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(RecordName(r, i), ": zero bytes, expected a JPEG or PNG image"));
    }
    if (sample.size() > kMaxEncodedSampleBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(RecordName(r, i), ": ", sample.size(), " bytes, more than the ",
                       kMaxEncodedSampleBytes, "-byte (256 MiB) limit of an encoded sample"));
    }
    std::optional<SampleEncoding> e = SniffImageEncoding(sample);
    if (!e) {
      return absl::InvalidArgumentError(absl::StrCat(
          RecordName(r, i), ": not a JPEG or PNG image (starts with ",
          absl::BytesToHexString(sample.substr(0, 8)),
          "; expected FF D8 FF or 89 50 4E 47 0D 0A 1A 0A); sluice stores JPEG and PNG files"));
    }
    spec.encoding = i == 0 ? *e : CombineEncodings(spec.encoding, *e);
  }
  return spec;
}

}  // namespace

absl::StatusOr<uint32_t> CheckLabels(const RecordArrays& r, std::optional<uint64_t> requested) {
  return CheckLabelValues(r.spec.label_dtype, r.labels, r.count, requested);
}

absl::StatusOr<uint32_t> CheckLabels(const EncodedRecords& r, std::optional<uint64_t> requested) {
  return CheckLabelValues(r.label_dtype, r.labels, r.samples.size(), requested);
}

absl::StatusOr<uint32_t> CheckLabels(const RecordSource& r, std::optional<uint64_t> requested) {
  return CheckLabelValues(r.spec.label_dtype, r.labels, r.count, requested);
}

namespace {

// The frame plan of fixed-size records: M records per frame but each shard's last.
SplitPlan PlanFixedFrames(const std::string& split, uint64_t count, const RecordSpec& spec,
                          const ShardingOptions& o) {
  SplitPlan plan;
  Manifest& m = plan.manifest;
  m.split = split;
  m.record_count = count;
  m.spec = spec;
  m.options = o;
  const uint64_t shard_count = (count + o.records_per_shard - 1) / o.records_per_shard;
  for (uint32_t s = 0; s < shard_count; ++s) {
    ShardEntry e;  // e.file, e.bytes and e.xxh3 are known once the shard is written
    e.first_record = uint64_t{s} * o.records_per_shard;
    e.record_count = std::min<uint64_t>(o.records_per_shard, count - e.first_record);
    e.frame_count =
        static_cast<uint32_t>((e.record_count + o.records_per_frame - 1) / o.records_per_frame);
    for (uint32_t f = 0; f < e.frame_count; ++f) {
      const uint64_t first = e.first_record + uint64_t{f} * o.records_per_frame;
      const uint64_t end = std::min(e.first_record + e.record_count, first + o.records_per_frame);
      const auto n = static_cast<uint32_t>(end - first);
      plan.jobs.push_back(
          {s, f, first, n, static_cast<uint32_t>(FrameView::ExpectedBytes(spec, n))});
    }
    m.shards.push_back(std::move(e));
  }
  return plan;
}

// The frame plan of encoded records (docs/formats/shard.md, "How the writer cuts frames"):
// within each shard, a frame is closed at M records or when the next record would take its raw
// size past frame_bytes; a frame takes at least one record.
SplitPlan PlanVariableFrames(const std::string& split, const EncodedRecords& r,
                             const RecordSpec& spec, const ShardingOptions& o) {
  SplitPlan plan;
  Manifest& m = plan.manifest;
  m.split = split;
  m.record_count = r.samples.size();
  m.spec = spec;
  m.options = o;
  const uint64_t count = r.samples.size();
  const uint64_t per_record = FrameView::VariableOverheadBytes(spec, 1);
  for (uint32_t s = 0; uint64_t{s} * o.records_per_shard < count; ++s) {
    ShardEntry e;
    e.first_record = uint64_t{s} * o.records_per_shard;
    e.record_count = std::min<uint64_t>(o.records_per_shard, count - e.first_record);
    uint32_t largest = 0;
    FrameJob job{s, 0, e.first_record, 0, 0};
    for (uint64_t i = e.first_record; i < e.first_record + e.record_count; ++i) {
      const uint64_t size = per_record + r.samples[i].size();
      if (job.count > 0 &&
          (job.count == o.records_per_frame || job.raw_size + size > o.frame_bytes)) {
        plan.jobs.push_back(job);
        job = FrameJob{s, job.frame + 1, i, 0, 0};
      }
      ++job.count;
      job.raw_size += static_cast<uint32_t>(size);
      largest = std::max(largest, static_cast<uint32_t>(r.samples[i].size()));
    }
    plan.jobs.push_back(job);
    e.frame_count = job.frame + 1;
    plan.max_sample_bytes.push_back(largest);
    m.shards.push_back(std::move(e));
  }
  return plan;
}

// Assembles and compresses the planned frames in parallel, one window at a time (codec none:
// stores the raw bytes), so a write holds the frames of one window, never the whole split.
// Each frame's bytes depend only on its records and the options, and the frames are written in
// index order, so neither the thread count nor the windows can change the output.
class FrameWindows {
 public:
  FrameWindows(const SplitPlan& plan, const AssembleFrame& assemble,
               const WriteDatasetOptions& options)
      : jobs_(plan.jobs),
        assemble_(assemble),
        options_(options),
        compress_(!plan.manifest.spec.encoded() || options.sharding.codec == FrameCodec::kZstd),
        arena_(options.threads > 0 ? options.threads : tbb::task_arena::automatic) {
    arena_.initialize();
    threads_ = static_cast<size_t>(std::max(1, arena_.max_concurrency()));
    raw_.resize(threads_);
  }

  // The end of the window that starts at job `begin`: a frame per thread, then more while
  // their raw bytes stay within kFrameWindowBytes.
  size_t WindowEnd(size_t begin) const {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < jobs_.size() &&
           (end - begin < threads_ || bytes + jobs_[end].raw_size <= kFrameWindowBytes)) {
      bytes += jobs_[end].raw_size;
      ++end;
    }
    return end;
  }

  // The stored bytes of jobs [begin, end) into (*stored)[0, end - begin).
  absl::Status Make(size_t begin, size_t end, std::vector<std::string>* stored) {
    if (stored->size() < end - begin) stored->resize(end - begin);
    errors_.assign(end - begin, absl::OkStatus());
    arena_.execute([&] {
      tbb::parallel_for(tbb::blocked_range<size_t>(begin, end, 1),
                        [&](const tbb::blocked_range<size_t>& range) {
                          for (size_t j = range.begin(); j != range.end(); ++j) {
                            MakeOne(j, begin, stored);
                          }
                        });
    });
    for (const absl::Status& e : errors_) RETURN_IF_ERROR(e);
    return absl::OkStatus();
  }

 private:
  void MakeOne(size_t j, size_t begin, std::vector<std::string>* stored) {
    const FrameJob& job = jobs_[j];
    std::string& out = (*stored)[j - begin];
    if (!compress_) {
      assemble_(job, &out);
    } else {
      // Assembled in this thread's buffer, reused across frames (no page faults per frame)
      // and freed with the write.
      const int slot = tbb::this_task_arena::current_thread_index();
      std::string& raw = raw_[static_cast<size_t>(std::max(0, slot)) % threads_];
      assemble_(job, &raw);
      absl::StatusOr<std::string> c = CompressFrame(raw, options_.sharding.zstd_level);
      if (c.ok()) {
        out = *std::move(c);
      } else {
        errors_[j - begin] = c.status();
      }
    }
    const uint64_t total = done_.fetch_add(job.count) + job.count;
    if (options_.on_progress) options_.on_progress(total);
  }

  const std::vector<FrameJob>& jobs_;
  const AssembleFrame& assemble_;
  const WriteDatasetOptions& options_;
  const bool compress_;
  tbb::task_arena arena_;
  size_t threads_ = 1;
  std::vector<std::string> raw_;  // one per thread of the arena (current_thread_index)
  std::vector<absl::Status> errors_;
  std::atomic<uint64_t> done_{0};
};

// The header of shard `s` of the planned split.
ShardHeader HeaderOfShard(const SplitPlan& plan, uint32_t s) {
  const Manifest& m = plan.manifest;
  const ShardEntry& e = m.shards[s];
  ShardHeader h;
  h.spec = m.spec;
  h.record_count = e.record_count;
  h.first_record = e.first_record;
  h.records_per_frame = m.options.records_per_frame;
  h.frame_count = e.frame_count;
  h.shard_index = s;
  if (m.spec.encoded()) {
    h.codec = m.options.codec;
    h.max_sample_bytes = plan.max_sample_bytes[s];
  }
  return h;
}

// Removes split `other` of `dir` (WriteDatasetOptions::remove_split_first), the caller holding
// the lock: its manifest first, durably (the split is gone once the directory fsync returns),
// then its shards and temporaries, best effort (what stays is a leftover the next write of
// `other` removes). OK when `other` has no manifest.
absl::Status RemoveOtherSplit(Env* env, const std::string& dir, const std::string& other,
                              const std::string& split) {
  const std::string manifest = JoinPath(dir, ManifestFileName(other));
  if (!env->FileExists(manifest)) return absl::OkStatus();
  absl::Status removed = env->DeleteFile(manifest);
  if (removed.ok()) removed = env->SyncDir(dir);
  if (!removed.ok()) {
    return absl::Status(
        removed.code(),
        absl::StrCat("split \"", Printable(other), "\" must be removed before split \"",
                     Printable(split),
                     "\" is written (the two are written as a pair, and the new \"",
                     Printable(split), "\" beside the old \"", Printable(other),
                     "\" would share records with it); nothing was written: ", removed.message()));
  }
  if (auto children = env->GetChildren(dir); children.ok()) {
    for (const std::string& c : *children) {
      if (IsShardOrTempOfSplit(c, other)) env->DeleteFile(JoinPath(dir, c)).IgnoreError();
    }
  }
  return absl::OkStatus();
}

// Writes the planned split under the directory lock: frames, shards, the manifest switch and
// the cleanup (docs/formats/shard.md, "Atomicity and rewriting a split").
absl::StatusOr<Manifest> WriteSplit(Env* env, const std::string& dir, SplitPlan plan,
                                    const AssembleFrame& assemble,
                                    const WriteDatasetOptions& options) {
  const std::string& split = plan.manifest.split;
  // One writer per directory, for the whole write (docs/formats/lock.md); creates `dir`.
  ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock,
                   FileLock::Acquire(env, dir, absl::StrCat("writing split \"", split, "\"")));
  if (!options.remove_split_first.empty()) {
    RETURN_IF_ERROR(CheckSplitName(options.remove_split_first));
    if (options.remove_split_first == split) {
      return absl::InvalidArgumentError(
          absl::StrCat("split \"", split, "\": the split to remove first is the split written"));
    }
    RETURN_IF_ERROR(RemoveOtherSplit(env, dir, options.remove_split_first, split));
  }
  Manifest& m = plan.manifest;
  m.sources = options.sources;
  m.num_classes = options.num_classes;
  m.class_names = options.class_names;
  const std::vector<FrameJob>& jobs = plan.jobs;
  const uint32_t shard_count = static_cast<uint32_t>(m.shards.size());
  // The new split goes beside the old one under its own names; the manifest's rename is the
  // switch; the old split's shards are deleted only after it (docs/formats/shard.md,
  // "Atomicity and rewriting a split").
  const std::string manifest_path = JoinPath(dir, ManifestFileName(split));
  const std::string manifest_tmp = manifest_path + ".tmp";
  std::vector<std::string> created;  // shard paths this write renamed into place, new names only
  bool switched = false;
  absl::Status status = [&]() -> absl::Status {
    FrameWindows frames(plan, assemble, options);
    std::vector<std::string> stored;  // the window's frames, reused from window to window
    OpenShard shard;
    for (size_t begin = 0; begin < jobs.size();) {
      const size_t end = frames.WindowEnd(begin);
      RETURN_IF_ERROR(frames.Make(begin, end, &stored));
      for (size_t j = begin; j < end; ++j) {
        const FrameJob& job = jobs[j];
        const std::string tmp = JoinPath(dir, ShardTempFileName(split, job.shard));
        if (job.frame == 0) {
          ASSIGN_OR_RETURN(shard, StartShardFile(env, tmp, HeaderOfShard(plan, job.shard)));
        }
        RETURN_IF_ERROR(
            shard.writer->AddCompressedFrame(stored[j - begin], job.raw_size, job.count));
        ShardEntry& e = m.shards[job.shard];
        if (job.frame + 1 < e.frame_count) continue;
        RETURN_IF_ERROR(shard.Finish(&e));
        shard = OpenShard{};
        // A name stands for one content: an existing file of that name (a shard the old split
        // shares with the new one) has these bytes, and is not ours to delete on failure.
        e.file = ShardFileName(split, job.shard, e.xxh3);
        const std::string path = JoinPath(dir, e.file);
        const bool existed = env->FileExists(path);
        RETURN_IF_ERROR(env->RenameFile(tmp, path));
        if (!existed) created.push_back(path);
      }
      begin = end;
    }
    RETURN_IF_ERROR(env->SyncDir(dir));  // the shards' names are durable before the switch
    {
      ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewTemporaryFile(manifest_tmp));
      RETURN_IF_ERROR(file->Append(m.ToJson()));
      RETURN_IF_ERROR(file->Sync());
      RETURN_IF_ERROR(file->Close());
    }
    RETURN_IF_ERROR(env->RenameFile(manifest_tmp, manifest_path));
    switched = true;
    absl::Status synced = env->SyncDir(dir);
    if (!synced.ok()) {
      return absl::Status(synced.code(), absl::StrCat(manifest_path,
                                                      ": written, but the directory fsync after "
                                                      "its rename failed (the old split's shards "
                                                      "are kept): ",
                                                      synced.message()));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    if (switched) return status;  // the new manifest may be live: delete nothing
    for (uint32_t s = 0; s < shard_count; ++s) {
      const std::string tmp = JoinPath(dir, ShardTempFileName(split, s));
      if (env->FileExists(tmp)) env->DeleteFile(tmp).IgnoreError();
    }
    for (const std::string& p : created) env->DeleteFile(p).IgnoreError();
    if (env->FileExists(manifest_tmp)) env->DeleteFile(manifest_tmp).IgnoreError();
    return status;
  }

  // After the switch: remove the old split's shards and leftovers of interrupted writes. Best
  // effort: the new split is complete, and the next write removes what stays.
  std::set<std::string> keep;
  for (const ShardEntry& e : m.shards) keep.insert(e.file);
  if (auto children = env->GetChildren(dir); children.ok()) {
    for (const std::string& c : *children) {
      if (IsShardOrTempOfSplit(c, split) && keep.count(c) == 0) {
        env->DeleteFile(JoinPath(dir, c)).IgnoreError();
      }
    }
  }
  return m;
}

}  // namespace

absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordArrays& records,
                                      const WriteDatasetOptions& options) {
  RETURN_IF_ERROR(ValidateInput(split, records, options.sharding));
  RETURN_IF_ERROR(CheckFrameBytes(records.spec, records.count, options.sharding, options.names));
  const ShardingOptions o = StoredShardingOptions(records.spec, records.count, options.sharding);
  if (options.num_classes) RETURN_IF_ERROR(CheckLabels(records, *options.num_classes).status());
  if (!options.class_names.empty()) {
    return absl::InvalidArgumentError("class names are recorded for encoded images only");
  }
  const RecordSpec& spec = records.spec;
  AssembleFrame assemble = [&](const FrameJob& job, std::string* raw) {
    raw->clear();
    raw->reserve(job.raw_size);
    AppendFrameRaw(spec, records.samples.data() + job.first * spec.sample_bytes(),
                   records.labels.data() + job.first * spec.label_bytes(), job.count, raw);
  };
  SplitPlan plan = PlanFixedFrames(split, records.count, spec, o);
  plan.manifest.class_counts =
      CountClasses(spec.label_dtype, records.labels, records.count, options.num_classes);
  return WriteSplit(env, dir, std::move(plan), assemble, options);
}

absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordSource& records,
                                      const WriteDatasetOptions& options) {
  const RecordSpec& spec = records.spec;
  RETURN_IF_ERROR(ValidateRecords(split, spec, records.count, records.count * spec.sample_bytes(),
                                  records.labels.size(), options.sharding));
  RETURN_IF_ERROR(CheckFrameBytes(spec, records.count, options.sharding, options.names));
  const ShardingOptions o = StoredShardingOptions(spec, records.count, options.sharding);
  if (options.num_classes) RETURN_IF_ERROR(CheckLabels(records, *options.num_classes).status());
  if (!options.class_names.empty()) {
    return absl::InvalidArgumentError("class names are recorded for encoded images only");
  }
  if (!records.read_samples) return absl::InvalidArgumentError("records: no read_samples");
  AssembleFrame assemble = [&](const FrameJob& job, std::string* raw) {
    // The frame's layout (AppendFrameRaw): its samples, read in place, then its labels. Reserved
    // whole first: growing by the labels would double a large frame's buffer.
    const size_t sample_bytes = size_t{job.count} * spec.sample_bytes();
    raw->reserve(job.raw_size);
    raw->resize(sample_bytes);
    records.read_samples(job.first, job.count, raw->data());
    raw->append(records.labels.data() + job.first * spec.label_bytes(),
                size_t{job.count} * spec.label_bytes());
  };
  SplitPlan plan = PlanFixedFrames(split, records.count, spec, o);
  plan.manifest.class_counts =
      CountClasses(spec.label_dtype, records.labels, records.count, options.num_classes);
  return WriteSplit(env, dir, std::move(plan), assemble, options);
}

namespace {

// The largest width, height and pixel count over the samples' headers, and the first record
// of the largest pixel count (`*record`); nullopt when a header does not give a size (the
// reader then bounds images by its default).
std::optional<ImageSizeBound> LargestImage(const EncodedRecords& r, uint64_t* record) {
  ImageSizeBound b;
  for (uint64_t i = 0; i < r.samples.size(); ++i) {
    absl::StatusOr<ImageStructure> h = ReadImageHeader(r.samples[i]);
    if (!h.ok()) return std::nullopt;
    b.max_width = std::max(b.max_width, h->width);
    b.max_height = std::max(b.max_height, h->height);
    if (const uint64_t pixels = uint64_t{h->width} * h->height; pixels > b.max_pixels) {
      b.max_pixels = pixels;
      *record = i;
    }
  }
  if (b.max_pixels == 0) return std::nullopt;
  return b;
}

}  // namespace

absl::StatusOr<Manifest> WriteEncodedDataset(Env* env, const std::string& dir,
                                             const std::string& split,
                                             const EncodedRecords& records,
                                             const WriteDatasetOptions& options) {
  const ShardingOptions& o = options.sharding;
  ASSIGN_OR_RETURN(RecordSpec spec, ValidateEncodedInput(split, records, o));
  if (options.num_classes) RETURN_IF_ERROR(CheckLabels(records, *options.num_classes).status());
  if (!options.class_names.empty() &&
      (!options.num_classes || options.class_names.size() != *options.num_classes)) {
    return absl::InvalidArgumentError(absl::StrCat(options.class_names.size(),
                                                   " class names for num_classes ",
                                                   options.num_classes.value_or(0)));
  }
  if (!records.sources.empty() && records.sources.size() != records.samples.size()) {
    return absl::InvalidArgumentError(absl::StrCat(records.sources.size(), " source names for ",
                                                   records.samples.size(), " samples"));
  }
  SplitPlan plan = PlanVariableFrames(split, records, spec, o);
  uint64_t largest = 0;
  plan.manifest.image_bound = LargestImage(records, &largest);
  if (plan.manifest.image_bound) plan.manifest.max_pixels_record = largest;
  plan.manifest.record_sources = records.sources;
  plan.manifest.class_counts =
      CountClasses(spec.label_dtype, records.labels, records.samples.size(), options.num_classes);
  AssembleFrame assemble = [&](const FrameJob& job, std::string* raw) {
    raw->clear();
    std::vector<absl::string_view> samples(records.samples.begin() + job.first,
                                           records.samples.begin() + job.first + job.count);
    raw->reserve(job.raw_size);
    AppendVariableFrameRaw(spec, samples, records.labels.data() + job.first * spec.label_bytes(),
                           raw);
  };
  return WriteSplit(env, dir, std::move(plan), assemble, options);
}

}  // namespace sluice
