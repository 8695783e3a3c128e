#include "python/src/dataset.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "pybind11/numpy.h"
#include "python/src/errors.h"
#include "storage/frame_view.h"
#include "storage/shard_reader.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

// The sample's values as a new array: [H, W], or [H, W, C] when C > 1.
py::array SampleArray(const RecordSpec& spec, const char* sample) {
  std::vector<py::ssize_t> shape = {spec.height, spec.width};
  if (spec.channels != 1) shape.push_back(spec.channels);
  py::array arr = spec.sample_dtype == SampleDType::kU8 ? py::array(py::dtype::of<uint8_t>(), shape)
                                                        : py::array(py::dtype::of<float>(), shape);
  std::memcpy(arr.mutable_data(), sample, spec.sample_bytes());
  return arr;
}

int64_t LabelValue(const RecordSpec& spec, const char* label) {
  if (spec.label_dtype == LabelDType::kU8) return static_cast<uint8_t>(*label);
  int32_t v;
  std::memcpy(&v, label, 4);
  return v;
}

}  // namespace

PyDataset::PyDataset(const std::string& path, const std::string& split) {
  absl::StatusOr<std::unique_ptr<Dataset>> ds;
  {
    py::gil_scoped_release nogil;
    ds = Dataset::Open(Env::Default(), path, split);
  }
  ds_ = Unwrap(std::move(ds));
}

py::tuple PyDataset::Get(int64_t index) {
  const int64_t n = static_cast<int64_t>(ds_->record_count());
  if (index < -n || index >= n) {  // the index as the caller gave it, negative or not
    throw py::index_error(absl::StrCat("record index ", index, " out of range for ",
                                       ds_->manifest_path(), " (", n, " records: expected -", n,
                                       " to ", n - 1, ")"));
  }
  if (index < 0) index += n;
  const auto& shards = ds_->manifest().shards;
  size_t s = 0;
  while (s + 1 < shards.size() && shards[s + 1].first_record <= static_cast<uint64_t>(index)) ++s;
  const ShardReader* r = Unwrap(ds_->shard(s));
  const uint64_t in_shard = static_cast<uint64_t>(index) - shards[s].first_record;
  const auto& frames = r->frames();
  uint32_t f = 0;
  while (f + 1 < frames.size() && frames[f + 1].first_record <= in_shard) ++f;
  LoadFrame(*r, s, f);
  const RecordSpec& spec = ds_->spec();
  const FrameView frame(spec, frames[f].record_count, frame_.data());
  const auto k = static_cast<uint32_t>(in_shard - frames[f].first_record);
  return py::make_tuple(SampleArray(spec, frame.sample(k)), LabelValue(spec, frame.label(k)));
}

void PyDataset::LoadFrame(const ShardReader& reader, size_t shard, uint32_t frame) {
  if (shard == cached_shard_ && frame == cached_frame_) return;
  absl::Status st;
  {
    py::gil_scoped_release nogil;
    st = reader.ReadFrame(frame, &frame_);
  }
  cached_shard_ = SIZE_MAX;  // frame_ holds a partial frame until the read succeeded
  Check(st);
  cached_shard_ = shard;
  cached_frame_ = frame;
}

void PyDataset::Verify() const {
  absl::Status s;
  {
    py::gil_scoped_release nogil;
    s = VerifyDataset(*ds_);
  }
  Check(s);
}

}  // namespace sluice::python
