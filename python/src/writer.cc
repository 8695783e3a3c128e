#include "python/src/writer.h"

#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "python/src/errors.h"
#include "python/src/fork_guard.h"
#include "storage/array_layout.h"
#include "storage/dataset_writer.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

void CheckLabelShape(const py::array& images, const py::array& labels) {
  if (labels.ndim() != 1 || labels.shape(0) != images.shape(0)) {
    RaiseStatus(absl::InvalidArgumentError(
        absl::StrCat("labels: expected an array of shape [N] with N = ", images.shape(0),
                     " (the number of images)")));
  }
}

// Fills r->spec's sample fields, r->count and r->samples from `images`, stored as (H, W, C).
void SetSamples(const py::array& images, const std::string& layout_text, RecordArrays* r) {
  if (images.dtype().is(py::dtype::of<uint8_t>())) {
    r->spec.sample_dtype = SampleDType::kU8;
  } else if (images.dtype().is(py::dtype::of<float>())) {
    r->spec.sample_dtype = SampleDType::kF32;
  } else {
    RaiseStatus(
        absl::InvalidArgumentError(absl::StrCat("images: dtype must be uint8 or float32, got ",
                                                py::str(images.dtype()).cast<std::string>())));
  }
  std::optional<ArrayLayout> layout;
  if (!layout_text.empty()) layout = Unwrap(ParseArrayLayout(layout_text, "layout"));
  std::vector<uint64_t> dims;
  for (py::ssize_t i = 0; i < images.ndim(); ++i) dims.push_back(images.shape(i));
  const ArraySamples s =
      Unwrap(SamplesOfArray(dims, layout, "images", "layout=\"NHWC\" or layout=\"NCHW\""));
  r->count = s.count;
  r->spec.height = s.height;
  r->spec.width = s.width;
  r->spec.channels = s.channels;
  py::array contiguous = py::array::ensure(images, py::array::c_style);
  const char* data = static_cast<const char*>(contiguous.data());
  if (s.transpose_chw) {
    r->samples.resize(r->count * r->spec.sample_bytes());
    TransposeChwToHwc(data, r->samples.data(), s.count, s.channels, s.height, s.width,
                      SampleDTypeSize(r->spec.sample_dtype));
  } else {
    r->samples.assign(data, r->count * r->spec.sample_bytes());
  }
}

// Fills r->spec.label_dtype and r->labels from `labels` (r->count set already).
void SetLabels(const py::array& labels, RecordArrays* r) {
  if (labels.dtype().is(py::dtype::of<uint8_t>())) {
    r->spec.label_dtype = LabelDType::kU8;
    py::array l = py::array::ensure(labels, py::array::c_style);
    r->labels.assign(static_cast<const char*>(l.data()), r->count);
  } else if (labels.dtype().is(py::dtype::of<int32_t>()) ||
             labels.dtype().is(py::dtype::of<int64_t>())) {
    r->spec.label_dtype = LabelDType::kI32;
    py::array_t<int64_t, py::array::c_style | py::array::forcecast> l(labels);
    r->labels.resize(r->count * 4);
    for (uint64_t i = 0; i < r->count; ++i) {
      const int64_t v = l.at(static_cast<py::ssize_t>(i));
      if (v < INT32_MIN || v > INT32_MAX) {
        RaiseStatus(absl::InvalidArgumentError(
            absl::StrCat("labels[", i, "] = ", v, " does not fit in int32")));
      }
      const int32_t v32 = static_cast<int32_t>(v);
      std::memcpy(r->labels.data() + i * 4, &v32, 4);
    }
  } else {
    RaiseStatus(
        absl::InvalidArgumentError(absl::StrCat("labels: dtype must be uint8, int32 or int64, got ",
                                                py::str(labels.dtype()).cast<std::string>())));
  }
}

// The manifest's summary returned by sluice.write_dataset.
py::dict Summary(const Manifest& manifest) {
  py::dict d;
  d["split"] = manifest.split;
  d["records"] = manifest.record_count;
  d["shards"] = manifest.shards.size();
  d["num_classes"] = *manifest.num_classes;
  return d;
}

// The items of `images` as byte strings; TypeError naming the first that is not bytes.
std::vector<std::string> EncodedSamples(const py::list& images) {
  std::vector<std::string> samples;
  samples.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const py::handle item = images[i];
    if (!py::isinstance<py::bytes>(item)) {
      throw py::type_error(absl::StrCat("images[", i,
                                        "]: expected bytes (an encoded JPEG or PNG file), got ",
                                        item.get_type().attr("__name__").cast<std::string>()));
    }
    samples.push_back(item.cast<std::string>());
  }
  return samples;
}

}  // namespace

py::dict WriteDatasetFromEncoded(const std::string& out, const std::string& split, py::list images,
                                 py::array labels, uint64_t records_per_shard,
                                 uint32_t records_per_frame, uint32_t frame_bytes,
                                 const std::string& codec, int zstd_level, int threads,
                                 uint64_t num_classes, std::vector<std::string> classes,
                                 std::vector<std::string> sources) {
  CheckNotForked("sluice.write_dataset");
  NoteThreadsStarted();  // its TBB workers
  EncodedRecords r;
  r.samples = EncodedSamples(images);
  r.sources = std::move(sources);  // the Python side checked: none, or one per image
  if (labels.ndim() != 1 || static_cast<size_t>(labels.shape(0)) != r.samples.size()) {
    RaiseStatus(absl::InvalidArgumentError(
        absl::StrCat("labels: expected an array of shape [N] with N = ", r.samples.size(),
                     " (the number of images)")));
  }
  RecordArrays label_holder;  // SetLabels' label checks and conversion
  label_holder.count = r.samples.size();
  SetLabels(labels, &label_holder);
  r.label_dtype = label_holder.spec.label_dtype;
  r.labels = std::move(label_holder.labels);
  WriteDatasetOptions o;
  o.num_classes = Unwrap(
      CheckLabels(r, num_classes == 0 ? std::nullopt : std::optional<uint64_t>(num_classes)));
  o.class_names = std::move(classes);
  o.sharding.records_per_shard = records_per_shard;
  o.sharding.records_per_frame = records_per_frame;
  o.sharding.frame_bytes = frame_bytes;
  o.sharding.codec = Unwrap(ParseFrameCodec(codec));
  o.sharding.zstd_level = zstd_level;
  o.threads = threads;
  absl::StatusOr<Manifest> m;
  {
    py::gil_scoped_release nogil;
    m = WriteEncodedDataset(Env::Default(), out, split, r, o);
  }
  SkipTbbTeardownInForkChildren();
  return Summary(Unwrap(std::move(m)));
}

py::dict WriteDatasetFromArrays(const std::string& out, const std::string& split, py::array images,
                                py::array labels, uint64_t records_per_shard,
                                uint32_t records_per_frame, int zstd_level, int threads,
                                const std::string& layout, uint64_t num_classes) {
  CheckNotForked("sluice.write_dataset");
  NoteThreadsStarted();  // its TBB workers
  RecordArrays r;
  SetSamples(images, layout, &r);
  CheckLabelShape(images, labels);
  SetLabels(labels, &r);
  WriteDatasetOptions o;
  o.num_classes = Unwrap(
      CheckLabels(r, num_classes == 0 ? std::nullopt : std::optional<uint64_t>(num_classes)));
  o.sharding.records_per_shard = records_per_shard;
  o.sharding.records_per_frame = records_per_frame;
  o.sharding.zstd_level = zstd_level;
  o.threads = threads;
  absl::StatusOr<Manifest> m;
  {
    py::gil_scoped_release nogil;
    m = WriteDataset(Env::Default(), out, split, r, o);
  }
  SkipTbbTeardownInForkChildren();
  return Summary(Unwrap(std::move(m)));
}

}  // namespace sluice::python
