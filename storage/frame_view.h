// The one place that knows where a record lies inside a decoded (raw) frame. Every reader of
// frame bytes (the pipeline's gather, the dataset's record arrays, the shard reader's index
// check, the Python Dataset, the ceilings, sluice-shard) goes through FrameView; the one writer
// of frame bytes is AppendFrameRaw below.
//
// Two layouts (docs/formats/shard.md):
// - fixed-size records (version 1, "Frame"): the `records` samples back to back, then the
//   `records` labels back to back;
// - variable-size records (version 2, encoded images): a u32 offset table `sample_end`, then
//   the labels back to back, then the sample bytes back to back.
// Readers ask sample(i), sample_size(i) and label(i) whatever the layout; record i of a frame
// is found from the frame's own table, never from i * a record size.
//
// A FrameView borrows the frame's bytes: they must outlive it. It checks nothing on access: a
// fixed-size frame must have ExpectedBytes() bytes, and a variable-size one must have passed
// CheckVariableFrame() (ShardReader::DecodeFrame does both before any caller sees a frame).
#ifndef SLUICE_STORAGE_FRAME_VIEW_H_
#define SLUICE_STORAGE_FRAME_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/coding.h"
#include "storage/shard_format.h"

namespace sluice {

class FrameView {
 public:
  FrameView(const RecordSpec& spec, uint32_t records, const char* data)
      : data_(data),
        records_(records),
        variable_(spec.encoded()),
        sample_bytes_(variable_ ? 0 : spec.sample_bytes()),
        label_bytes_(spec.label_bytes()) {}

  // The raw size of a frame of `records` fixed-size records.
  static uint64_t ExpectedBytes(const RecordSpec& spec, uint64_t records) {
    return records * spec.record_bytes();
  }
  // The bytes of a variable-size frame's offset table and labels: all but its sample bytes.
  static uint64_t VariableOverheadBytes(const RecordSpec& spec, uint64_t records) {
    return records * (sizeof(uint32_t) + spec.label_bytes());
  }

  uint32_t records() const { return records_; }
  bool variable() const { return variable_; }
  size_t sample_bytes() const { return sample_bytes_; }  // of each sample; 0 if variable()
  size_t label_bytes() const { return label_bytes_; }    // of each label
  // Record i's sample, its size in bytes, and its label (i < records()).
  const char* sample(uint32_t i) const {
    if (!variable_) return data_ + size_t{i} * sample_bytes_;
    return variable_samples() + (i == 0 ? 0 : SampleEnd(i - 1));
  }
  size_t sample_size(uint32_t i) const {
    if (!variable_) return sample_bytes_;
    return SampleEnd(i) - (i == 0 ? 0 : SampleEnd(i - 1));
  }
  const char* label(uint32_t i) const {
    const size_t labels_at =
        variable_ ? size_t{records_} * sizeof(uint32_t) : size_t{records_} * sample_bytes_;
    return data_ + labels_at + size_t{i} * label_bytes_;
  }
  // Records [first, first + count) are contiguous in both runs: their samples start at
  // sample(first) and their labels at label(first) (the bulk copies of whole frames use this).

 private:
  uint32_t SampleEnd(uint32_t i) const {
    return DecodeFixed32(data_ + size_t{i} * sizeof(uint32_t));
  }
  const char* variable_samples() const {
    return data_ + size_t{records_} * (sizeof(uint32_t) + label_bytes_);
  }

  const char* data_;
  uint32_t records_;
  bool variable_;
  size_t sample_bytes_;
  size_t label_bytes_;
};

// Checks a variable-size frame's offset table (docs/formats/shard.md, "Version 2"): every
// sample has 1..max_sample_bytes bytes and the samples end exactly at the end of `raw`. On
// failure, the index of the first bad record and what was expected; the caller names the file
// and the frame.
struct VariableFrameError {
  uint32_t record;
  std::string what;
};
inline std::optional<VariableFrameError> CheckVariableFrame(const RecordSpec& spec,
                                                            uint32_t records, absl::string_view raw,
                                                            uint32_t max_sample_bytes) {
  const uint64_t overhead = FrameView::VariableOverheadBytes(spec, records);
  if (records == 0 || raw.size() < overhead) {
    return VariableFrameError{0, absl::StrCat("frame of ", raw.size(), " bytes cannot hold ",
                                              records, " records' offsets and labels")};
  }
  const uint64_t sample_total = raw.size() - overhead;
  uint64_t previous = 0;
  for (uint32_t i = 0; i < records; ++i) {
    const uint32_t end = DecodeFixed32(raw.data() + size_t{i} * sizeof(uint32_t));
    if (end <= previous || end - previous > max_sample_bytes || end > sample_total) {
      return VariableFrameError{
          i, absl::StrCat("sample_end ", end, " after ", previous, ": expected a sample of 1 to ",
                          max_sample_bytes, " bytes (max_sample_bytes) ending within the ",
                          sample_total, " sample bytes")};
    }
    previous = end;
  }
  if (previous != sample_total) {
    return VariableFrameError{records - 1,
                              absl::StrCat("samples end at ", previous, ", expected ", sample_total,
                                           " (raw_size minus offsets and labels)")};
  }
  return std::nullopt;
}

// Appends the raw frame of `count` fixed-size records to `raw`: `samples` holds their samples
// back to back (count * sample_bytes), `labels` their labels (count * label_bytes).
inline void AppendFrameRaw(const RecordSpec& spec, const char* samples, const char* labels,
                           uint32_t count, std::string* raw) {
  raw->append(samples, size_t{count} * spec.sample_bytes());
  raw->append(labels, size_t{count} * spec.label_bytes());
}

// Appends the raw frame of variable-size records to `raw`: `samples` are their byte strings,
// `labels` their labels back to back (samples.size() * label_bytes). The caller keeps each
// sample within kMaxEncodedSampleBytes and the frame within 2^32 - 1 bytes.
inline void AppendVariableFrameRaw(const RecordSpec& spec,
                                   absl::Span<const absl::string_view> samples, const char* labels,
                                   std::string* raw) {
  uint32_t end = 0;
  for (absl::string_view s : samples) {
    end += static_cast<uint32_t>(s.size());
    PutFixed32(raw, end);
  }
  raw->append(labels, samples.size() * spec.label_bytes());
  for (absl::string_view s : samples) raw->append(s.data(), s.size());
}

}  // namespace sluice

#endif  // SLUICE_STORAGE_FRAME_VIEW_H_
