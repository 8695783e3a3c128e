#include "python/src/writer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/printable.h"
#include "pipeline/transforms/decode_check.h"
#include "python/src/errors.h"
#include "python/src/fork_guard.h"
#include "storage/array_layout.h"
#include "storage/dataset_writer.h"
#include "storage/image_structure.h"
#include "storage/shard_format.h"

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

// Where the elements of an array's samples are: the array's data and, per stored axis
// (record, H, W, C), the byte stride the array gives it (0 for an axis the array lacks, or one
// that NumPy broadcast). Strides may be zero or negative; the array is read in place.
struct StridedSamples {
  const char* data = nullptr;
  int64_t record = 0, h = 0, w = 0, c = 0;  // byte strides
  uint32_t height = 0, width = 0, channels = 0;
  size_t element = 0;  // bytes per element: 1 (uint8) or 4 (float32)
};

// Copies the elements of one sample row (W x C elements at `row`) to `out` as (W, C).
template <size_t kElement>
char* CopyRow(const StridedSamples& a, const char* row, char* out) {
  for (uint32_t x = 0; x < a.width; ++x) {
    const char* pixel = row + x * a.w;
    for (uint32_t ch = 0; ch < a.channels; ++ch, out += kElement) {
      std::memcpy(out, pixel + ch * a.c, kElement);
    }
  }
  return out;
}

// Records [first, first + n) of `a` into `out`, each stored as (H, W, C): one memcpy per record
// when the array holds it as stored, one per row when its rows are, else element by element.
void ReadStridedSamples(const StridedSamples& a, uint64_t first, uint32_t n, char* out) {
  const int64_t e = static_cast<int64_t>(a.element);
  const int64_t row_bytes = int64_t{a.width} * a.channels * e;
  const bool rows_as_stored =
      (a.channels == 1 || a.c == e) && (a.width == 1 || a.w == a.channels * e);
  const bool records_as_stored = rows_as_stored && (a.height == 1 || a.h == row_bytes);
  for (uint64_t i = first; i < first + n; ++i) {
    const char* record = a.data + static_cast<int64_t>(i) * a.record;
    if (records_as_stored) {
      std::memcpy(out, record, static_cast<size_t>(row_bytes) * a.height);
      out += row_bytes * a.height;
      continue;
    }
    for (uint32_t y = 0; y < a.height; ++y) {
      const char* row = record + y * a.h;
      if (rows_as_stored) {
        std::memcpy(out, row, static_cast<size_t>(row_bytes));
        out += row_bytes;
      } else {
        out = a.element == 1 ? CopyRow<1>(a, row, out) : CopyRow<4>(a, row, out);
      }
    }
  }
}

// Fills r->spec's sample fields and r->count from `images`, and r->read_samples to read its
// samples in place, stored as (H, W, C), a frame at a time: whatever the array's strides
// (broadcast, sliced, negative, Fortran order, a memmap), nothing but the frames in flight is
// copied. The array must outlive the write.
void SetSamples(const py::array& images, const std::string& layout_text, RecordSource* r) {
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
  StridedSamples a;
  a.data = static_cast<const char*>(images.data());
  a.height = s.height;
  a.width = s.width;
  a.channels = s.channels;
  a.element = SampleDTypeSize(r->spec.sample_dtype);
  a.record = images.strides(0);
  switch (images.ndim()) {
    case 2:  // [N, D]: stored as 1 x D x 1
      a.w = images.strides(1);
      break;
    case 3:  // [N, H, W]
      a.h = images.strides(1);
      a.w = images.strides(2);
      break;
    default:  // 4-D, NHWC or NCHW
      a.h = images.strides(s.transpose_chw ? 2 : 1);
      a.w = images.strides(s.transpose_chw ? 3 : 2);
      a.c = images.strides(s.transpose_chw ? 1 : 3);
  }
  r->read_samples = [a](uint64_t first, uint32_t n, char* out) {
    ReadStridedSamples(a, first, n, out);
  };
}

// The array `a` (labels) as a C-contiguous array of its dtype; raises what NumPy raised (a
// MemoryError) when it cannot make one.
py::array Contiguous(const py::array& a) {
  py::array c = py::array::ensure(a, py::array::c_style);
  if (!c) throw py::error_already_set();
  return c;
}

// Fills r->spec.label_dtype and r->labels from `labels` (r->count set already).
template <typename Records>
void SetLabels(const py::array& labels, Records* r) {
  if (labels.dtype().is(py::dtype::of<uint8_t>())) {
    r->spec.label_dtype = LabelDType::kU8;
    py::array l = Contiguous(labels);
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

// The checks of sluice-shard create's ingestion, in write_dataset's words: each image's
// structure (CheckImageStructure: markers and chunks walked to the end, a truncated file
// refused), its declared size against `max_pixels` (0: no bound), and with `verify` "decode" a
// decode with training's decoder (DecodeCheck). "none" reads the header only, for the pixel
// bound: damaged images stored on purpose. Every image is checked (in parallel); the first
// kNamedBad refused are named by index and source, then a count, then how to store damaged
// images unchecked where the check refused one.
absl::Status CheckImages(const EncodedRecords& r, uint64_t max_pixels, const std::string& verify) {
  constexpr size_t kNamedBad = 5;
  const size_t n = r.samples.size();
  std::vector<std::string> bad(n);
  std::vector<char> damaged(n, 0);  // refused by the check, not by the size bound
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [&](const tbb::blocked_range<size_t>& b) {
    for (size_t i = b.begin(); i != b.end(); ++i) {
      const std::string& bytes = r.samples[i];
      absl::StatusOr<ImageStructure> s =
          verify == "none" ? ReadImageHeader(bytes) : CheckImageStructure(bytes);
      if (!s.ok()) {
        // Unchecked too, an item whose header does not parse is refused: one that is no JPEG
        // or PNG at all, and one whose header gives no size (the manifest would record none,
        // and the whole split decode under the 4096x4096 fallback).
        bad[i] = std::string(s.status().message());
        // verify_images=None would store it only if its header parses.
        damaged[i] = verify != "none" && ReadImageHeader(bytes).ok();
        continue;
      }
      if (max_pixels != 0 && !CheckDeclaredPixels(*s, max_pixels).ok()) {
        bad[i] = absl::StrCat("declares ", s->width, "x", s->height, " = ",
                              uint64_t{s->width} * s->height,
                              " pixels (width x height), more than the bound of ", max_pixels,
                              " (max_image_pixels; the default is PIL's Image.MAX_IMAGE_PIXELS, ",
                              kDefaultMaxImagePixels, ", and None means no bound)");
        continue;
      }
      if (verify == "decode") {
        if (absl::Status d = DecodeCheck(bytes); !d.ok()) {
          bad[i] = std::string(d.message());
          damaged[i] = 1;
        }
      }
    }
  });
  std::string message;
  size_t refused = 0;
  bool any_damaged = false;
  for (size_t i = 0; i < n; ++i) {
    if (bad[i].empty()) continue;
    any_damaged = any_damaged || damaged[i];
    if (++refused > kNamedBad) continue;
    // A source is the caller's text: escaped and cut as every name in a message is.
    const std::string source =
        i < r.sources.size() ? absl::StrCat(" (", Printable(r.sources[i]), ")") : "";
    absl::StrAppend(&message, refused > 1 ? "; " : "", "images[", i, "]", source, ": ", bad[i]);
  }
  if (refused == 0) return absl::OkStatus();
  if (refused > kNamedBad) absl::StrAppend(&message, "; and ", refused - kNamedBad, " more");
  if (refused > 1) absl::StrAppend(&message, " (", refused, " images refused)");
  if (any_damaged) {
    absl::StrAppend(&message, " (checked with verify_images=\"", verify,
                    "\"; verify_images=None stores such images unchecked, and training refuses "
                    "each when it decodes it)");
  }
  return absl::InvalidArgumentError(absl::StrCat(message, "; nothing was written"));
}

}  // namespace

py::dict WriteDatasetFromEncoded(const std::string& out, const std::string& split, py::list images,
                                 py::array labels, uint64_t records_per_shard,
                                 uint32_t records_per_frame, uint32_t frame_bytes,
                                 const std::string& codec, int zstd_level, int threads,
                                 uint64_t num_classes, std::vector<std::string> classes,
                                 std::vector<std::string> sources, uint64_t max_image_pixels,
                                 const std::string& verify_images) {
  CheckNotForked("sluice.write_dataset");
  if (verify_images != "structure" && verify_images != "decode" && verify_images != "none") {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat(
        "verify_images: expected \"structure\", \"decode\" or None, got \"", verify_images, "\"")));
  }
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
  o.names = {.records_per_frame = "records_per_frame", .records_per_shard = "records_per_shard"};
  o.sharding.frame_bytes = frame_bytes;
  o.sharding.codec = Unwrap(ParseFrameCodec(codec));
  o.sharding.zstd_level = zstd_level;
  o.threads = threads;
  absl::StatusOr<Manifest> m;
  {
    py::gil_scoped_release nogil;
    // The split's name first: a cheap refusal before the images are read through.
    absl::Status checked = CheckSplitName(split);
    if (checked.ok()) checked = CheckImages(r, max_image_pixels, verify_images);
    m = checked.ok() ? WriteEncodedDataset(Env::Default(), out, split, r, o)
                     : absl::StatusOr<Manifest>(checked);
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
  RecordSource r;
  SetSamples(images, layout, &r);
  CheckLabelShape(images, labels);
  SetLabels(labels, &r);
  WriteDatasetOptions o;
  o.num_classes = Unwrap(
      CheckLabels(r, num_classes == 0 ? std::nullopt : std::optional<uint64_t>(num_classes)));
  o.sharding.records_per_shard = records_per_shard;
  o.sharding.records_per_frame = records_per_frame;
  o.names = {.records_per_frame = "records_per_frame", .records_per_shard = "records_per_shard"};
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
