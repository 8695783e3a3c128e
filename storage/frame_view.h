// The one place that knows where a record lies inside a decoded (raw) frame. Every reader of
// frame bytes (the pipeline's gather, the dataset's record arrays, the shard reader's index
// check, the Python Dataset, the ceilings, sluice-shard) goes through FrameView; the one writer
// of frame bytes is AppendFrameRaw below.
//
// Today's layout (docs/formats/shard.md, "Frame"): fixed-size records, columnar: the `records`
// samples back to back, then the `records` labels back to back. A variable-size layout (e.g.
// encoded images) changes only this header, the writer (AppendFrameRaw, ShardWriter) and
// docs/formats/shard.md; every reader keeps asking sample(i) and label(i).
//
// A FrameView borrows the frame's bytes: they must outlive it. It checks nothing on access;
// ExpectedBytes() is what a decoded frame's size must equal before a view is made over it.
#ifndef SLUICE_STORAGE_FRAME_VIEW_H_
#define SLUICE_STORAGE_FRAME_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/shard_format.h"

namespace sluice {

class FrameView {
 public:
  FrameView(const RecordSpec& spec, uint32_t records, const char* data)
      : data_(data),
        records_(records),
        sample_bytes_(spec.sample_bytes()),
        label_bytes_(spec.label_bytes()) {}

  // The raw size of a frame of `records` records.
  static uint64_t ExpectedBytes(const RecordSpec& spec, uint64_t records) {
    return records * spec.record_bytes();
  }
  uint64_t expected_bytes() const { return uint64_t{records_} * (sample_bytes_ + label_bytes_); }

  uint32_t records() const { return records_; }
  size_t sample_bytes() const { return sample_bytes_; }  // of each sample
  size_t label_bytes() const { return label_bytes_; }    // of each label
  // Record i's sample and label (i < records()).
  const char* sample(uint32_t i) const { return data_ + size_t{i} * sample_bytes_; }
  const char* label(uint32_t i) const {
    return data_ + size_t{records_} * sample_bytes_ + size_t{i} * label_bytes_;
  }
  // Records [first, first + count) are contiguous in both runs: their samples start at
  // sample(first) and their labels at label(first) (the bulk copies of whole frames use this).

 private:
  const char* data_;
  uint32_t records_;
  size_t sample_bytes_;
  size_t label_bytes_;
};

// Appends the raw frame of `count` records to `raw`: `samples` holds their samples back to
// back (count * sample_bytes), `labels` their labels (count * label_bytes).
inline void AppendFrameRaw(const RecordSpec& spec, const char* samples, const char* labels,
                           uint32_t count, std::string* raw) {
  raw->append(samples, size_t{count} * spec.sample_bytes());
  raw->append(labels, size_t{count} * spec.label_bytes());
}

}  // namespace sluice

#endif  // SLUICE_STORAGE_FRAME_VIEW_H_
