#include "storage/dataset_records.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "storage/frame_view.h"

namespace sluice {

absl::StatusOr<RecordArrays> ReadAllRecords(const Dataset& dataset, int threads) {
  RecordArrays out;
  out.spec = dataset.spec();
  out.count = dataset.record_count();
  if (dataset.spec().encoded()) {
    const SampleEncoding e = dataset.spec().encoding;
    const char* files = e == SampleEncoding::kJpeg  ? "JPEG files"
                        : e == SampleEncoding::kPng ? "PNG files"
                                                    : "JPEG and PNG files";
    return absl::InvalidArgumentError(absl::StrCat(
        dataset.manifest_path(), ": records are ", files, " stored as given (sample.encoding \"",
        SampleEncodingName(e),
        "\"), whose sizes may differ; reading them as fixed-size arrays needs each one decoded "
        "first (DecodeImage, in sluice.Loader or sluice-train --transforms)"));
  }
  // The manifest's shape is data: check its product before allocating it (a 65536x65536
  // split must fail with a message, not bad_alloc).
  const std::string what =
      absl::StrCat(dataset.manifest_path(), ": ", out.count, " records of ", out.spec.height, "x",
                   out.spec.width, "x", out.spec.channels);
  ASSIGN_OR_RETURN(const uint64_t sb,
                   CheckedProduct(what, {out.spec.height, out.spec.width, out.spec.channels,
                                         SampleDTypeSize(out.spec.sample_dtype)}));
  const size_t lb = out.spec.label_bytes();
  ASSIGN_OR_RETURN(const uint64_t sample_total, CheckedProduct(what, {out.count, sb}));
  ASSIGN_OR_RETURN(const uint64_t label_total, CheckedProduct(what, {out.count, lb}));

  struct Job {
    const ShardReader* reader;
    uint32_t frame;
    uint64_t first;  // within the split
  };
  std::vector<Job> jobs;
  const Manifest& m = dataset.manifest();
  for (size_t s = 0; s < m.shards.size(); ++s) {
    ASSIGN_OR_RETURN(const ShardReader* r, dataset.shard(s));
    for (uint32_t f = 0; f < r->frame_count(); ++f) {
      jobs.push_back({r, f, m.shards[s].first_record + r->frames()[f].first_record});
    }
  }
  // Only now, with every shard open and checked against the manifest (Dataset::shard), is the
  // manifest's record count backed by files: a manifest claiming more records than its shards
  // hold fails there instead of first allocating what it claims.
  RETURN_IF_ERROR(CheckMemory(absl::StrCat(what, " in memory"), sample_total + label_total));
  out.samples.resize(out.count * sb);
  out.labels.resize(out.count * lb);
  std::vector<absl::Status> errors(jobs.size());
  tbb::task_arena arena(threads > 0 ? threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t j) {
      const Job& job = jobs[j];
      std::string raw;
      errors[j] = job.reader->ReadFrame(job.frame, &raw);
      if (!errors[j].ok()) return;
      const FrameView frame(out.spec, job.reader->frames()[job.frame].record_count, raw.data());
      // A frame's samples (and its labels) are contiguous; so are the arrays'.
      std::memcpy(out.samples.data() + job.first * sb, frame.sample(0), frame.records() * sb);
      std::memcpy(out.labels.data() + job.first * lb, frame.label(0), frame.records() * lb);
    });
  });
  for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
  return out;
}

}  // namespace sluice
