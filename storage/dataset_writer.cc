#include "storage/dataset_writer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/coding.h"
#include "common/file_lock.h"
#include "common/status_macros.h"
#include "storage/frame_view.h"
#include "storage/shard_writer.h"

namespace sluice {
namespace {

// A frame to compress: shard `shard`, frame `frame`, global records [first, first + count).
struct FrameJob {
  uint32_t shard;
  uint32_t frame;
  uint64_t first;
  uint32_t count;
};

absl::Status ValidateInput(const std::string& split, const RecordArrays& r,
                           const ShardingOptions& o) {
  if (split.empty() || absl::StrContains(split, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("split name \"", split, "\": expected a plain name such as train"));
  }
  if (r.count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("split ", split, ": zero records; a shard holds at least one"));
  }
  const RecordSpec& s = r.spec;
  if (s.height == 0 || s.width == 0 || s.channels == 0) {
    return absl::InvalidArgumentError(absl::StrCat("sample shape ", s.height, "x", s.width, "x",
                                                   s.channels, ": expected each >= 1"));
  }
  if (r.samples.size() != r.count * s.sample_bytes() ||
      r.labels.size() != r.count * s.label_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("records: expected ", r.count * s.sample_bytes(),
                                                   " sample bytes and ", r.count * s.label_bytes(),
                                                   " label bytes for ", r.count, " records, got ",
                                                   r.samples.size(), " and ", r.labels.size()));
  }
  if (o.records_per_frame == 0 || o.records_per_shard == 0) {
    return absl::InvalidArgumentError("records per frame and per shard must be >= 1");
  }
  if (uint64_t{o.records_per_frame} * s.record_bytes() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.records_per_frame, " records of ", s.record_bytes(),
                     " bytes per frame exceed the 4 GiB frame limit; lower --records-per-frame"));
  }
  if ((r.count + o.records_per_shard - 1) / o.records_per_shard > UINT32_MAX) {
    return absl::InvalidArgumentError("too many shards; raise --records-per-shard");
  }
  if (o.zstd_level < 1 || o.zstd_level > ZSTD_maxCLevel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("zstd level ", o.zstd_level, ": expected 1..", ZSTD_maxCLevel()));
  }
  return absl::OkStatus();
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

// Writes shard `header` to `tmp` (fsynced and closed); fills entry->bytes, entry->xxh3 and
// entry->meta_xxh3.
absl::Status WriteShardFile(Env* env, const std::string& tmp, const ShardHeader& header,
                            const std::vector<std::string>& stored,
                            const std::vector<FrameJob>& jobs, size_t first_job,
                            ShardEntry* entry) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewTemporaryFile(tmp));
  ShardWriter writer(file.get(), header);
  for (uint32_t f = 0; f < header.frame_count; ++f) {
    const FrameJob& job = jobs[first_job + f];
    RETURN_IF_ERROR(writer.AddCompressedFrame(
        stored[first_job + f],
        static_cast<uint32_t>(FrameView::ExpectedBytes(header.spec, job.count)), job.count));
  }
  RETURN_IF_ERROR(writer.Finish());
  RETURN_IF_ERROR(file->Sync());
  RETURN_IF_ERROR(file->Close());
  entry->bytes = writer.bytes_written();
  entry->xxh3 = writer.file_checksum();
  entry->meta_xxh3 = writer.meta_checksum();
  return absl::OkStatus();
}

int64_t LabelAt(const RecordArrays& r, uint64_t i) {
  if (r.spec.label_dtype == LabelDType::kU8) return static_cast<uint8_t>(r.labels[i]);
  return static_cast<int32_t>(DecodeFixed32(r.labels.data() + 4 * i));
}

}  // namespace

absl::StatusOr<uint32_t> CheckLabels(const RecordArrays& r, std::optional<uint64_t> requested) {
  const uint64_t most = r.spec.label_dtype == LabelDType::kU8 ? 256 : INT32_MAX;
  if (requested && (*requested == 0 || *requested > most)) {
    return absl::InvalidArgumentError(absl::StrCat("num_classes ", *requested, ": expected in [1, ",
                                                   most, "] for ",
                                                   LabelDTypeName(r.spec.label_dtype), " labels"));
  }
  if (r.labels.size() != r.count * r.spec.label_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("labels: ", r.labels.size(), " bytes, expected ",
                                                   r.count * r.spec.label_bytes()));
  }
  int64_t max_label = -1;
  for (uint64_t i = 0; i < r.count; ++i) {
    const int64_t label = LabelAt(r, i);
    if (label < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("label of record ", i, " is ", label, ": expected a class index >= 0"));
    }
    if (requested && static_cast<uint64_t>(label) >= *requested) {
      return absl::InvalidArgumentError(absl::StrCat("label of record ", i, " is ", label,
                                                     ": expected a class index in [0, ", *requested,
                                                     ") (num_classes ", *requested, ")"));
    }
    max_label = std::max(max_label, label);
  }
  if (requested) return static_cast<uint32_t>(*requested);
  return static_cast<uint32_t>(max_label + 1);
}

absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordArrays& records,
                                      const WriteDatasetOptions& options) {
  const ShardingOptions& o = options.sharding;
  RETURN_IF_ERROR(ValidateInput(split, records, o));
  if (options.num_classes) RETURN_IF_ERROR(CheckLabels(records, *options.num_classes).status());
  // One writer per directory, for the whole write (docs/formats/lock.md); creates `dir`.
  ASSIGN_OR_RETURN(std::unique_ptr<FileLock> lock,
                   FileLock::Acquire(env, dir, absl::StrCat("writing split \"", split, "\"")));

  const RecordSpec& spec = records.spec;
  Manifest m;
  m.split = split;
  m.record_count = records.count;
  m.spec = spec;
  m.options = o;
  m.sources = options.sources;
  m.num_classes = options.num_classes;

  std::vector<FrameJob> jobs;
  std::vector<size_t> first_job_of_shard;
  const uint64_t shard_count = (records.count + o.records_per_shard - 1) / o.records_per_shard;
  for (uint32_t s = 0; s < shard_count; ++s) {
    ShardEntry e;  // e.file, e.bytes and e.xxh3 are known once the shard is written
    e.first_record = uint64_t{s} * o.records_per_shard;
    e.record_count = std::min<uint64_t>(o.records_per_shard, records.count - e.first_record);
    e.frame_count =
        static_cast<uint32_t>((e.record_count + o.records_per_frame - 1) / o.records_per_frame);
    first_job_of_shard.push_back(jobs.size());
    for (uint32_t f = 0; f < e.frame_count; ++f) {
      const uint64_t first = e.first_record + uint64_t{f} * o.records_per_frame;
      const uint64_t end = std::min(e.first_record + e.record_count, first + o.records_per_frame);
      jobs.push_back({s, f, first, static_cast<uint32_t>(end - first)});
    }
    m.shards.push_back(std::move(e));
  }

  // Compress every frame in parallel. Each frame's bytes depend only on its records and the
  // level, and frames are written in index order afterwards, so the thread count cannot change
  // the output.
  std::vector<std::string> stored(jobs.size());
  std::vector<absl::Status> errors(jobs.size());
  std::atomic<uint64_t> done{0};
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, jobs.size(), 1),
                      [&](const tbb::blocked_range<size_t>& range) {
                        for (size_t j = range.begin(); j != range.end(); ++j) {
                          const FrameJob& job = jobs[j];
                          // The frame is assembled in a per-thread buffer reused across
                          // frames (no page faults per frame).
                          thread_local std::string raw;
                          raw.clear();
                          AppendFrameRaw(spec,
                                         records.samples.data() + job.first * spec.sample_bytes(),
                                         records.labels.data() + job.first * spec.label_bytes(),
                                         static_cast<uint32_t>(job.count), &raw);
                          auto c = CompressFrame(raw, o.zstd_level);
                          if (c.ok()) {
                            stored[j] = std::move(*c);
                          } else {
                            errors[j] = c.status();
                          }
                          const uint64_t total = done.fetch_add(job.count) + job.count;
                          if (options.on_progress) options.on_progress(total);
                        }
                      });
  });
  for (const absl::Status& e : errors) RETURN_IF_ERROR(e);

  // The new split goes beside the old one under its own names; the manifest's rename is the
  // switch; the old split's shards are deleted only after it (docs/formats/shard.md,
  // "Atomicity and rewriting a split").
  const std::string manifest_path = JoinPath(dir, ManifestFileName(split));
  const std::string manifest_tmp = manifest_path + ".tmp";
  std::vector<std::string> created;  // shard paths this write renamed into place, new names only
  bool switched = false;
  absl::Status status = [&]() -> absl::Status {
    for (uint32_t s = 0; s < shard_count; ++s) {
      ShardEntry& e = m.shards[s];
      ShardHeader h;
      h.spec = spec;
      h.record_count = e.record_count;
      h.first_record = e.first_record;
      h.records_per_frame = o.records_per_frame;
      h.frame_count = e.frame_count;
      h.shard_index = s;
      const std::string tmp = JoinPath(dir, ShardTempFileName(split, s));
      RETURN_IF_ERROR(WriteShardFile(env, tmp, h, stored, jobs, first_job_of_shard[s], &e));
      // A name stands for one content: an existing file of that name (a shard the old split
      // shares with the new one) has these bytes, and is not ours to delete on failure.
      e.file = ShardFileName(split, s, e.xxh3);
      const std::string path = JoinPath(dir, e.file);
      const bool existed = env->FileExists(path);
      RETURN_IF_ERROR(env->RenameFile(tmp, path));
      if (!existed) created.push_back(path);
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

}  // namespace sluice
