#include "python/src/dataset.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "common/printable.h"
#include "pybind11/numpy.h"
#include "python/src/errors.h"
#include "storage/frame_view.h"
#include "storage/remote/remote_env.h"
#include "storage/shard_reader.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

// One sample's shape: [H, W], or [H, W, C] when C > 1.
std::vector<py::ssize_t> SampleShape(const RecordSpec& spec) {
  std::vector<py::ssize_t> shape = {spec.height, spec.width};
  if (spec.channels != 1) shape.push_back(spec.channels);
  return shape;
}

// A new array of `count` samples' values (`count` < 0: one sample, without the leading dim).
py::array SampleArray(const RecordSpec& spec, py::ssize_t count) {
  std::vector<py::ssize_t> shape = SampleShape(spec);
  if (count >= 0) shape.insert(shape.begin(), count);
  return spec.sample_dtype == SampleDType::kU8 ? py::array(py::dtype::of<uint8_t>(), shape)
                                               : py::array(py::dtype::of<float>(), shape);
}

int64_t LabelValue(const RecordSpec& spec, const char* label) {
  if (spec.label_dtype == LabelDType::kU8) return static_cast<uint8_t>(*label);
  int32_t v;
  std::memcpy(&v, label, 4);
  return v;
}

}  // namespace

absl::StatusOr<std::string> SplitManifestPath(const std::string& path,
                                              const std::optional<std::string>& split) {
  if (!split.has_value()) return path;
  const std::string wanted = ManifestFileName(*split);
  if (absl::EndsWith(path, kManifestSuffix)) {
    const std::string name = BaseName(path);
    if (name == wanted) return path;
    return absl::InvalidArgumentError(absl::StrCat(
        "split: ", path, " is the manifest of split \"",
        name.substr(0, name.size() - std::strlen(kManifestSuffix)), "\", not \"", *split,
        "\"; pass the dataset directory with split=, or that split's manifest"));
  }
  absl::StatusOr<std::vector<std::string>> children = remote::UrlEnv()->GetChildren(path);
  // A URL's store that could not be asked (unreachable, access denied) says so as it is.
  if (!children.ok() && children.status().code() != absl::StatusCode::kNotFound &&
      absl::StrContains(path, "://")) {
    return children.status();
  }
  if (!children.ok()) {
    return absl::NotFoundError(absl::StrCat(path, ": expected a dataset directory or a *",
                                            kManifestSuffix, " file (", children.status().message(),
                                            ")"));
  }
  std::vector<std::string> splits;
  for (const std::string& child : *children) {
    if (child == wanted) return JoinPath(path, child);
    if (absl::EndsWith(child, kManifestSuffix)) {
      splits.push_back(child.substr(0, child.size() - std::strlen(kManifestSuffix)));
    }
  }
  if (splits.empty()) return NoManifestError(remote::UrlEnv(), path, *children);
  std::sort(splits.begin(), splits.end());
  return absl::InvalidArgumentError(absl::StrCat("split: ", path, " has no split \"", *split,
                                                 "\"; its splits: ", absl::StrJoin(splits, ", ")));
}

namespace {

std::string TypeName(const py::handle& value) {
  return py::str(value.get_type().attr("__name__")).cast<std::string>();
}

// `value` as a path: a str, or an os.PathLike giving one; TypeError naming `name` otherwise,
// UnicodeEncodeError for a lone surrogate that no file name's bytes give.
std::string PathArgument(const char* name, const py::object& value) {
  py::object path = value;
  if (!py::isinstance<py::str>(value) && py::hasattr(value, "__fspath__")) {
    path = py::reinterpret_steal<py::object>(PyOS_FSPath(value.ptr()));
    if (!path) throw py::error_already_set();
  }
  if (!py::isinstance<py::str>(path)) {
    throw py::type_error(absl::StrCat(name, ": expected a str or os.PathLike, got ",
                                      py::repr(value).cast<std::string>(), " (", TypeName(value),
                                      ")"));
  }
  // Its bytes as os.fsencode gives them: a file name that is not UTF-8 (a surrogate escape,
  // PEP 383) opens that file.
  const py::object bytes = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(path.ptr()));
  if (!bytes) throw py::error_already_set();
  return bytes.cast<std::string>();
}

// `value` (a str) as UTF-8; ValueError naming `name` for a lone surrogate (os.listdir's spelling
// of a byte that is not UTF-8), which UTF-8 cannot hold.
std::string TextArgument(const char* name, const py::handle& value) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    throw py::value_error(absl::StrCat(
        name, ": ", Printable(py::repr(value).cast<std::string>()),
        " holds a lone surrogate (os.listdir's spelling of a byte that is not UTF-8); expected "
        "UTF-8 text"));
  }
  return std::string(data, static_cast<size_t>(size));
}

}  // namespace

PyDataset::PyDataset(const py::object& path, const py::object& split) {
  const std::string dataset_path = PathArgument("sluice.Dataset: path", path);
  if (!split.is_none() && !py::isinstance<py::str>(split)) {
    throw py::type_error(absl::StrCat("sluice.Dataset: split: expected a str or None, got ",
                                      py::repr(split).cast<std::string>(), " (", TypeName(split),
                                      ")"));
  }
  const std::optional<std::string> split_name =
      split.is_none() ? std::nullopt
                      : std::optional<std::string>(TextArgument("sluice.Dataset: split", split));
  const std::string manifest = Unwrap(SplitManifestPath(dataset_path, split_name));
  absl::StatusOr<std::unique_ptr<Dataset>> ds;
  {
    py::gil_scoped_release nogil;
    ds = Dataset::Open(remote::UrlEnv(), manifest, "train", ShardFiles::kOneAtATime);
  }
  ds_ = Unwrap(std::move(ds));
}

py::tuple PyDataset::GetItem(const py::object& key) {
  if (py::isinstance<py::slice>(key)) return GetSlice(key.cast<py::slice>());
  // A bool, NumPy's too (np.bool_, a 0-d bool array), is refused as a slip, not read as 0 or 1;
  // an array of indices (NumPy's fancy indexing) is not an index: one record at a time.
  const bool numpy_bool = py::hasattr(key, "dtype") && py::hasattr(key.attr("dtype"), "kind") &&
                          py::str(key.attr("dtype").attr("kind")).cast<std::string>() == "b";
  py::object index;
  if (PyIndex_Check(key.ptr()) && !py::isinstance<py::bool_>(key) && !numpy_bool) {
    index = py::reinterpret_steal<py::object>(PyNumber_Index(key.ptr()));
    if (!index) PyErr_Clear();  // an array of more than one element: refused below
  }
  if (!index) {
    std::string shown;  // one line, at most 80 characters (NumPy's repr spans lines)
    for (const char c : py::repr(key).cast<std::string>()) {
      if (c == '\n' || (c == ' ' && !shown.empty() && shown.back() == ' ')) continue;
      shown.push_back(c);
    }
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    throw py::type_error(absl::StrCat(
        "sluice.Dataset indices must be an int or a slice, got ", shown, " (",
        key.get_type().attr("__name__").cast<std::string>(), ")",
        numpy_bool || py::isinstance<py::bool_>(key) ? "; a bool is not an index"
        : py::hasattr(key, "shape")
            ? "; an array of indices is not an index: take records one at a time or by a slice"
            : ""));
  }
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    const int64_t n = static_cast<int64_t>(ds_->record_count());
    throw py::index_error(absl::StrCat("record index ", py::repr(index).cast<std::string>(),
                                       " out of range for ", ds_->manifest_path(), " (", n,
                                       " records: expected -", n, " to ", n - 1, ")"));
  }
  return Get(value);
}

py::tuple PyDataset::Get(int64_t index) {
  const int64_t n = static_cast<int64_t>(ds_->record_count());
  if (index < -n || index >= n) {  // the index as the caller gave it, negative or not
    throw py::index_error(absl::StrCat("record index ", index, " out of range for ",
                                       ds_->manifest_path(), " (", n, " records: expected -", n,
                                       " to ", n - 1, ")"));
  }
  if (index < 0) index += n;
  const RecordSpec& spec = ds_->spec();
  const RecordRef r = Locate(static_cast<uint64_t>(index));
  if (spec.encoded()) return py::make_tuple(py::bytes(r.sample, r.size), LabelValue(spec, r.label));
  py::array arr = SampleArray(spec, -1);
  std::memcpy(arr.mutable_data(), r.sample, spec.sample_bytes());
  return py::make_tuple(arr, LabelValue(spec, r.label));
}

py::tuple PyDataset::GetSlice(const py::slice& slice) {
  size_t start = 0, stop = 0, step = 0, count = 0;
  if (!slice.compute(static_cast<size_t>(ds_->record_count()), &start, &stop, &step, &count)) {
    throw py::error_already_set();  // a zero step: Python's ValueError
  }
  const RecordSpec& spec = ds_->spec();
  py::array_t<int64_t> labels(static_cast<py::ssize_t>(count));
  int64_t* out_labels = labels.mutable_data();
  // compute() gives the step as a size_t: a negative step wraps, and so does the index.
  size_t index = start;
  if (spec.encoded()) {  // samples of different sizes: a list of bytes
    py::list images;
    for (size_t k = 0; k < count; ++k, index += step) {
      const RecordRef r = Locate(index);
      images.append(py::bytes(r.sample, r.size));
      out_labels[k] = LabelValue(spec, r.label);
    }
    return py::make_tuple(images, labels);
  }
  py::array images = SampleArray(spec, static_cast<py::ssize_t>(count));
  char* out = static_cast<char*>(images.mutable_data());
  for (size_t k = 0; k < count; ++k, index += step) {
    const RecordRef r = Locate(index);
    std::memcpy(out + k * spec.sample_bytes(), r.sample, spec.sample_bytes());
    out_labels[k] = LabelValue(spec, r.label);
  }
  return py::make_tuple(images, labels);
}

PyDataset::RecordRef PyDataset::Locate(uint64_t index) {
  const auto& shards = ds_->manifest().shards;
  size_t s = 0;
  while (s + 1 < shards.size() && shards[s + 1].first_record <= index) ++s;
  const ShardReader& r = Reader(s);
  const uint64_t in_shard = index - shards[s].first_record;
  const auto& frames = r.frames();
  // Frames of encoded records hold different counts: the index says which holds the record.
  const uint32_t f = r.FrameOfRecord(in_shard);
  LoadFrame(r, s, f);
  const RecordSpec& spec = ds_->spec();
  const FrameView frame(spec, frames[f].record_count, frame_.data());
  const auto k = static_cast<uint32_t>(in_shard - frames[f].first_record);
  return {frame.sample(k), frame.sample_size(k), frame.label(k)};
}

const ShardReader& PyDataset::Reader(size_t shard) {
  if (shard == reader_shard_) return *reader_;
  reader_.reset();  // closed before the next opens: one shard file at a time
  reader_shard_ = SIZE_MAX;
  absl::StatusOr<std::unique_ptr<ShardReader>> opened;
  {
    py::gil_scoped_release nogil;
    opened = ds_->OpenShard(shard);
  }
  reader_ = Unwrap(std::move(opened));
  reader_shard_ = shard;
  return *reader_;
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
