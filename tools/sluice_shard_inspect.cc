#include "tools/sluice_shard_inspect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/dataset.h"
#include "storage/frame_view.h"
#include "storage/shard_reader.h"

namespace sluice {
namespace {

// Prints `rows` (the first is the header) as columns two spaces apart, each as wide as its
// widest cell, indented by `indent`: the first column left-aligned when `left_first` (names),
// every other one right-aligned (numbers). Trailing spaces are not printed.
void PrintTable(const std::vector<std::vector<std::string>>& rows, bool left_first,
                const char* indent = "  ") {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c == 0 && left_first ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

// What inspect counts over a split's records: the label histogram and, for encoded images,
// every sample's size.
struct RecordStats {
  std::map<int64_t, uint64_t> labels;
  std::vector<uint32_t> sample_sizes;  // encoded records only
};

// Adds a raw frame's `n` records to `stats`.
void CountRecords(const RecordSpec& spec, const std::string& raw, uint32_t n, RecordStats* stats) {
  const FrameView frame(spec, n, raw.data());
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t v = spec.label_dtype == LabelDType::kU8
                          ? static_cast<uint8_t>(*frame.label(i))
                          : static_cast<int32_t>(DecodeFixed32(frame.label(i)));
    ++stats->labels[v];
    if (spec.encoded()) stats->sample_sizes.push_back(static_cast<uint32_t>(frame.sample_size(i)));
  }
}

absl::Status AddRecordStats(const ShardReader& r, RecordStats* stats) {
  std::string raw;
  for (uint32_t f = 0; f < r.frame_count(); ++f) {
    RETURN_IF_ERROR(r.ReadFrame(f, &raw));
    CountRecords(r.spec(), raw, r.frames()[f].record_count, stats);
  }
  return absl::OkStatus();
}

// The size distribution of encoded samples (percentiles by nearest rank), then the label
// histogram.
void PrintRecordStats(RecordStats stats) {
  std::vector<uint32_t>& sizes = stats.sample_sizes;
  if (!sizes.empty()) {
    std::sort(sizes.begin(), sizes.end());
    uint64_t total = 0;
    for (uint32_t s : sizes) total += s;
    auto rank = [&](double p) {
      const size_t k = static_cast<size_t>(std::ceil(p / 100.0 * sizes.size()));
      return static_cast<unsigned long long>(sizes[std::max<size_t>(k, 1) - 1]);
    };
    std::printf("sample sizes (bytes, %zu records, nearest-rank percentiles):\n", sizes.size());
    PrintTable(
        {{"min", "p50", "p90", "p99", "max", "mean", "total"},
         {absl::StrCat(rank(0)), absl::StrCat(rank(50)), absl::StrCat(rank(90)),
          absl::StrCat(rank(99)), absl::StrCat(rank(100)),
          absl::StrFormat("%.0f", static_cast<double>(total) / sizes.size()), absl::StrCat(total)}},
        /*left_first=*/false);
  }
  std::printf("label histogram (%zu distinct):\n", stats.labels.size());
  std::vector<std::vector<std::string>> rows = {{"label", "records"}};
  for (const auto& [label, n] : stats.labels)
    rows.push_back({absl::StrCat(label), absl::StrCat(n)});
  PrintTable(rows, /*left_first=*/false);
}

// "sample u8 3x32x32 (C x H x W, stored HWC; 3072 bytes), label u8": the shape in the
// [C, H, W] order batches have, and the order the bytes are stored in. Encoded: "sample
// encoded jpeg images (variable size), label u8".
std::string SpecString(const RecordSpec& s) {
  if (s.encoded()) {
    // The encoding is "jpeg", "png" or "image" (either): "encoded png images", "encoded images".
    const std::string encoding(SampleEncodingName(s.encoding));
    return absl::StrFormat("sample encoded %simages (variable size), label %s",
                           encoding == "image" ? "" : encoding + " ",
                           LabelDTypeName(s.label_dtype));
  }
  return absl::StrFormat("sample %s %dx%dx%d (C x H x W, stored HWC; %d bytes), label %s",
                         SampleDTypeName(s.sample_dtype), s.channels, s.height, s.width,
                         s.sample_bytes(), LabelDTypeName(s.label_dtype));
}

// How frames are cut and stored: "256 per frame, zstd level 3" or "at most 256 per frame,
// frames closed at 4194304 raw bytes, codec none".
std::string FramingString(const RecordSpec& spec, uint32_t per_frame, const ShardingOptions& o) {
  if (!spec.encoded())
    return absl::StrFormat("%u per frame, zstd level %d", per_frame, o.zstd_level);
  return absl::StrCat("at most ", per_frame, " per frame, frames closed at ", o.frame_bytes,
                      " raw bytes, codec ", FrameCodecName(o.codec),
                      o.codec == FrameCodec::kZstd ? absl::StrCat(" level ", o.zstd_level) : "");
}

absl::Status InspectShard(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, ShardReader::Open(env, path));
  const ShardHeader& h = r->header();
  std::printf("shard %s: %llu bytes, format version %u\n", Printable(path).c_str(),
              static_cast<unsigned long long>(r->file_size()), h.version());
  std::printf("  %s\n", SpecString(h.spec).c_str());
  std::printf("  shard_index %u, records [%llu, %llu) of the split, %s%u per frame, %u frames\n",
              h.shard_index, static_cast<unsigned long long>(h.first_record),
              static_cast<unsigned long long>(h.first_record + h.record_count),
              h.spec.encoded() ? "at most " : "", h.records_per_frame, h.frame_count);
  if (h.spec.encoded()) {
    std::printf("  codec %s, largest sample %u bytes\n",
                std::string(FrameCodecName(h.codec)).c_str(), h.max_sample_bytes);
  }
  std::vector<std::vector<std::string>> rows = {
      {"frame", "offset", "stored", "raw", "first", "count", "xxh3"}};
  uint64_t raw = 0, stored = 0;
  for (uint32_t i = 0; i < r->frame_count(); ++i) {
    const FrameInfo& f = r->frames()[i];
    rows.push_back({absl::StrCat(i), absl::StrCat(f.offset), absl::StrCat(f.stored_size),
                    absl::StrCat(f.raw_size), absl::StrCat(f.first_record),
                    absl::StrCat(f.record_count), ChecksumToHex(f.checksum)});
    raw += f.raw_size;
    stored += f.stored_size;
  }
  PrintTable(rows, /*left_first=*/false);
  std::printf("  index at %llu, footer at %llu\n",
              static_cast<unsigned long long>(r->file_size() - kFooterSize -
                                              uint64_t{kIndexEntrySize} * r->frame_count()),
              static_cast<unsigned long long>(r->file_size() - kFooterSize));
  std::printf(
      "compression: %llu raw bytes -> %llu stored (ratio %.2f; %.2f with header, "
      "index and footer)\n",
      static_cast<unsigned long long>(raw), static_cast<unsigned long long>(stored),
      static_cast<double>(raw) / stored, static_cast<double>(raw) / r->file_size());
  RecordStats stats;
  RETURN_IF_ERROR(AddRecordStats(*r, &stats));
  PrintRecordStats(std::move(stats));
  return absl::OkStatus();
}

absl::Status InspectDataset(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds,
                   Dataset::Open(env, path, "train", ShardFiles::kOneAtATime));
  const Manifest& m = ds->manifest();
  std::printf("manifest %s: split %s, %llu records\n", Printable(ds->manifest_path()).c_str(),
              Printable(m.split).c_str(), static_cast<unsigned long long>(m.record_count));
  std::printf("  %s%s\n", SpecString(m.spec).c_str(),
              m.num_classes ? absl::StrCat(", ", *m.num_classes, " classes").c_str() : "");
  // Names and record counts (label.classes, label.class_counts), as far as the manifest has them.
  const bool counts = !m.class_counts.empty();
  if (!m.class_names.empty() || counts) {
    std::printf("  classes (label: %s%s): ", m.class_names.empty() ? "" : "name",
                counts ? (m.class_names.empty() ? "records" : " (records)") : "");
    const size_t n = std::max(m.class_names.size(), m.class_counts.size());
    for (size_t k = 0; k < n; ++k) {
      std::printf("%s%zu: ", k > 0 ? ", " : "", k);
      if (!m.class_names.empty()) std::printf("%s", Printable(m.class_names[k]).c_str());
      if (counts) {
        std::printf(m.class_names.empty() ? "%llu" : " (%llu)",
                    static_cast<unsigned long long>(m.class_counts[k]));
      }
    }
    std::printf("\n");
  }
  std::printf("  options: %llu records per shard, %s\n",
              static_cast<unsigned long long>(m.options.records_per_shard),
              FramingString(m.spec, m.options.records_per_frame, m.options).c_str());
  if (m.image_bound) {
    std::printf(
        "  largest image (from the files' headers; each the largest of any file): %u "
        "wide, %u high, %llu pixels\n",
        m.image_bound->max_width, m.image_bound->max_height,
        static_cast<unsigned long long>(m.image_bound->max_pixels));
  }
  if (!m.record_sources.empty()) {
    std::printf("  record sources: recorded (record 0: %s)\n",
                Printable(m.record_sources[0]).c_str());
  }
  std::vector<std::vector<std::string>> rows = {
      {"shard", "first", "records", "frames", "bytes", "xxh3"}};
  uint64_t stored = 0, raw = 0;
  RecordStats stats;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& e = m.shards[i];
    rows.push_back({Printable(e.file), absl::StrCat(e.first_record), absl::StrCat(e.record_count),
                    absl::StrCat(e.frame_count), absl::StrCat(e.bytes), ChecksumToHex(e.xxh3)});
    stored += e.bytes;
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, ds->OpenShard(i));  // closed after
    RETURN_IF_ERROR(AddRecordStats(*r, &stats));
    for (const FrameInfo& f : r->frames()) raw += f.raw_size;
  }
  PrintTable(rows, /*left_first=*/true);
  for (const SourceEntry& s : m.sources) {
    std::printf("  source %s: %s, %llu bytes, xxh3 %s\n", Printable(s.role).c_str(),
                Printable(s.file).c_str(), static_cast<unsigned long long>(s.bytes),
                ChecksumToHex(s.xxh3).c_str());
  }
  std::printf("compression: %llu raw bytes -> %llu bytes in shard files (ratio %.2f)\n",
              static_cast<unsigned long long>(raw), static_cast<unsigned long long>(stored),
              static_cast<double>(raw) / stored);
  PrintRecordStats(std::move(stats));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunInspect(Env* env, const std::string& path) {
  if (absl::EndsWith(path, kShardSuffix)) return InspectShard(env, path);
  if (absl::EndsWith(path, kManifestSuffix)) return InspectDataset(env, path);
  auto children = env->GetChildren(path);
  if (!children.ok()) return InspectDataset(env, path);  // its error names the path
  std::vector<std::string> manifests;
  for (const std::string& c : *children) {
    if (absl::EndsWith(c, kManifestSuffix)) manifests.push_back(JoinPath(path, c));
  }
  if (manifests.empty()) return InspectDataset(env, path);
  std::sort(manifests.begin(), manifests.end());
  for (size_t i = 0; i < manifests.size(); ++i) {
    if (i > 0) std::printf("\n");
    RETURN_IF_ERROR(InspectDataset(env, manifests[i]));
  }
  return absl::OkStatus();
}

}  // namespace sluice
