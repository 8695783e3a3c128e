#include "storage/dataset_writer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <zstd.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
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
    return absl::InvalidArgumentError(absl::StrCat(
        "records: expected ", r.count * s.sample_bytes(), " sample bytes and ",
        r.count * s.label_bytes(), " label bytes for ", r.count, " records, got ",
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
    return absl::InvalidArgumentError(absl::StrCat("zstd level ", o.zstd_level, ": expected 1..",
                                                   ZSTD_maxCLevel()));
  }
  return absl::OkStatus();
}

// True for "<split>-<digits>.shard" and "<split>.manifest.json(.tmp)": files a previous write
// of this split may have left.
bool BelongsToSplit(absl::string_view name, absl::string_view split) {
  if (name == ManifestFileName(split) || name == ManifestFileName(split) + ".tmp") return true;
  if (!absl::ConsumePrefix(&name, split) || !absl::ConsumePrefix(&name, "-")) return false;
  absl::ConsumeSuffix(&name, ".tmp");
  if (!absl::ConsumeSuffix(&name, kShardSuffix) || name.empty()) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

absl::Status WriteOneShard(Env* env, const std::string& path, const ShardHeader& header,
                           const std::vector<std::string>& stored,
                           const std::vector<FrameJob>& jobs, size_t first_job,
                           size_t record_bytes, ShardEntry* entry) {
  const std::string tmp = path + ".tmp";
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(tmp));
  ShardWriter writer(file.get(), header);
  for (uint32_t f = 0; f < header.frame_count; ++f) {
    const FrameJob& job = jobs[first_job + f];
    RETURN_IF_ERROR(writer.AddCompressedFrame(
        stored[first_job + f], static_cast<uint32_t>(job.count * record_bytes), job.count));
  }
  RETURN_IF_ERROR(writer.Finish());
  RETURN_IF_ERROR(file->Sync());
  RETURN_IF_ERROR(file->Close());
  RETURN_IF_ERROR(env->RenameFile(tmp, path));
  entry->bytes = writer.bytes_written();
  entry->xxh3 = writer.file_checksum();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordArrays& records,
                                      const WriteDatasetOptions& options) {
  const ShardingOptions& o = options.sharding;
  RETURN_IF_ERROR(ValidateInput(split, records, o));
  RETURN_IF_ERROR(env->CreateDirs(dir));

  // Remove an older version of this split first, manifest included, so that a failure below
  // cannot leave an old manifest describing new shards.
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  for (const std::string& c : children) {
    if (BelongsToSplit(c, split)) RETURN_IF_ERROR(env->DeleteFile(JoinPath(dir, c)));
  }

  const RecordSpec& spec = records.spec;
  Manifest m;
  m.split = split;
  m.record_count = records.count;
  m.spec = spec;
  m.options = o;
  m.sources = options.sources;

  std::vector<FrameJob> jobs;
  std::vector<size_t> first_job_of_shard;
  const uint64_t shard_count = (records.count + o.records_per_shard - 1) / o.records_per_shard;
  for (uint32_t s = 0; s < shard_count; ++s) {
    ShardEntry e;
    e.file = ShardFileName(split, s);
    e.first_record = uint64_t{s} * o.records_per_shard;
    e.record_count = std::min<uint64_t>(o.records_per_shard, records.count - e.first_record);
    e.frame_count = static_cast<uint32_t>((e.record_count + o.records_per_frame - 1) /
                                          o.records_per_frame);
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
  tbb::task_arena arena(options.threads > 0 ? options.threads
                                            : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, jobs.size(), 1),
                      [&](const tbb::blocked_range<size_t>& range) {
                        for (size_t j = range.begin(); j != range.end(); ++j) {
                          const FrameJob& job = jobs[j];
                          // The frame layout (samples, then labels) is assembled in a
                          // per-thread buffer reused across frames (no page faults per frame).
                          thread_local std::string raw;
                          raw.assign(records.samples.data() + job.first * spec.sample_bytes(),
                                     job.count * spec.sample_bytes());
                          raw.append(records.labels.data() + job.first * spec.label_bytes(),
                                     job.count * spec.label_bytes());
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

  // Write shards in order, then the manifest. On failure remove everything of this split, so
  // what remains never looks like a dataset.
  const std::string manifest_path = JoinPath(dir, ManifestFileName(split));
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
      RETURN_IF_ERROR(WriteOneShard(env, JoinPath(dir, e.file), h, stored, jobs,
                                    first_job_of_shard[s], spec.record_bytes(), &e));
    }
    return WriteFileAtomically(env, manifest_path, m.ToJson());
  }();
  if (!status.ok()) {
    for (const ShardEntry& e : m.shards) {
      const std::string p = JoinPath(dir, e.file);
      if (env->FileExists(p + ".tmp")) env->DeleteFile(p + ".tmp").IgnoreError();
      if (env->FileExists(p)) env->DeleteFile(p).IgnoreError();
    }
    if (env->FileExists(manifest_path)) env->DeleteFile(manifest_path).IgnoreError();
    return status;
  }
  return m;
}

}  // namespace sluice
