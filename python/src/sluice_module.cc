// _sluice: the Python binding of the pipeline, the bottleneck report and the shard storage.
// The modules of python/sluice/ build the public API on it, each its part (docs/python.md):
// loader.py (sluice.Loader) on _LoaderCore and _Pass, writer.py on write_dataset, probe.py on
// analyze_probe, advice_check.py on check_advice, corruption_budget.py on
// _Pass.check_corrupt_fraction; __init__.py only re-exports (Dataset and DataLossError are this
// module's). This file holds only the bindings:
//   errors.h   absl::Status -> Python exception (the only place that raises from a Status)
//   dlpack.h   batches as DLPack capsules that own a lease on a pipeline buffer (zero copy)
//   loader.h   the loader and its passes (sluice.Loader)
//   dataset.h  random access to records (sluice.Dataset)
//   writer.h   sluice.write_dataset
//   probe.h    sluice.probe's report (the C++ report of another loader's figures)
//   advice_check.h  report(check_advice=True): the reruns' decisions and text (engine/job)
//   transforms_binding.h  _apply_transforms, one sample through a chain (oracle tests)
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "device/device.h"
#include "device/device_spec.h"
#include "engine/job/corrupt_fraction.h"
#include "pipeline/resource_limits.h"
#include "pipeline/transforms/transform_spec.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/advice_check.h"
#include "python/src/dataset.h"
#include "python/src/errors.h"
#include "python/src/fork_guard.h"
#include "python/src/loader.h"
#include "python/src/probe.h"
#include "python/src/transforms_binding.h"
#include "python/src/writer.h"
#include "report/stages.h"
#include "storage/image_structure.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

absl::Status DrainEpoch(const LoaderCore& c, uint64_t epoch, uint64_t* batches, uint64_t* samples,
                        double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline,
                   Pipeline::Create(&c.dataset(), c.Options(epoch, 0)));
  BatchLease lease;
  while (true) {
    ASSIGN_OR_RETURN(bool got, pipeline->Next(&lease));
    if (!got) break;
    ++*batches;
    *samples += lease.view().size;
    lease.Release();
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return absl::OkStatus();
}

// The C++ baseline of bench/loader_vs_pipeline.py: (batches, samples, seconds) of a pipeline
// with this loader's options draining epoch `epoch` with Pipeline::Next, no Python between
// batches; seconds from Create to the end, as a Loader pass counts them.
py::tuple DrainEpochTimed(const LoaderCore& c, uint64_t epoch) {
  CheckNotForked("_drain_epoch");
  NoteThreadsStarted();
  absl::Status status;
  uint64_t batches = 0, samples = 0;
  double seconds = 0;
  {
    py::gil_scoped_release nogil;
    status = DrainEpoch(c, epoch, &batches, &samples, &seconds);
  }
  SkipTbbTeardownInForkChildren();
  Check(status);
  return py::make_tuple(batches, samples, seconds);
}

void BindLoader(py::module_& m) {
  py::class_<LoaderCore, std::shared_ptr<LoaderCore>>(m, "_LoaderCore")
      .def(py::init(
          [](const std::string& path, uint32_t batch_size, bool shuffle, uint64_t seed,
             uint32_t window, bool drop_last, const std::string& device, const std::string& format,
             const std::vector<float>& mean, const std::vector<float>& std, int64_t threads,
             uint32_t rank, uint32_t world_size, const std::string& on_corrupt, int64_t pool_size,
             int64_t device_ring_depth, bool device_zero_copy, int64_t decompress_threads,
             int64_t preprocess_threads, int64_t read_ahead_frames, const std::string& transforms,
             bool work_ahead, const std::string& memory_format, int64_t read_concurrency,
             const std::string& cache_dir, uint64_t cache_bytes) {
            // sluice-train's bounds, before the values are narrowed (pipeline/resource_limits.h).
            Check(CheckResourceSettings(
                ResourceSettings{threads, decompress_threads, preprocess_threads, pool_size,
                                 read_ahead_frames, device_ring_depth},
                SettingNames::kPythonArguments));
            LoaderConfig c;
            c.path = path;
            c.order.batch_size = batch_size;
            c.order.shuffle = shuffle;
            c.order.seed = seed;
            c.order.shuffle_window_frames = window;
            c.order.drop_last = drop_last;
            c.device = device;
            // bf16 batches are the Loader's alone (sluice-train's --h2d-format refuses bf16).
            c.format.h2d_format =
                format == "bf16" ? ElementType::kBF16 : Unwrap(ParseH2DFormat(format));
            if (memory_format != "contiguous" && memory_format != "channels_last") {
              RaiseStatus(absl::InvalidArgumentError(
                  absl::StrCat("memory_format: expected 'contiguous' or 'channels_last', got '",
                               Printable(memory_format), "'")));
            }
            c.format.layout =
                memory_format == "channels_last" ? SampleLayout::kHWC : SampleLayout::kCHW;
            c.format.normalization = Normalization{.mean = mean, .std = std};
            c.threads = static_cast<int>(threads);
            c.slice = DataParallelSlice{rank, world_size};
            c.on_corrupt = Unwrap(ParseOnCorrupt(on_corrupt));
            c.pool_size = static_cast<uint32_t>(pool_size);
            c.device_ring_depth = static_cast<uint32_t>(device_ring_depth);
            c.device_zero_copy = device_zero_copy;
            c.decompress_threads = static_cast<int>(decompress_threads);
            c.preprocess_threads = static_cast<int>(preprocess_threads);
            c.read_ahead_frames = static_cast<uint32_t>(read_ahead_frames);
            c.work_ahead = work_ahead;
            c.read_concurrency = static_cast<uint32_t>(read_concurrency);
            c.cache_dir = cache_dir;
            c.cache_bytes = cache_bytes;
            // Parsed here, once (pipeline/transforms/transform_spec.h); the fit to the samples
            // is checked when the dataset is open.
            absl::StatusOr<TransformSpec> chain = TransformSpec::Parse(transforms);
            if (!chain.ok()) {
              RaiseStatus(absl::InvalidArgumentError(
                  absl::StrCat("transforms: ", chain.status().message())));
            }
            c.format.transforms = *std::move(chain);
            return LoaderCore::Create(c);
          }))
      .def("steps_per_epoch", &LoaderCore::steps_per_epoch)
      .def("manifest_path",
           [](const LoaderCore& c) { return FsPathToPython(c.dataset().manifest_path()); })
      .def("manifest_xxh3", &LoaderCore::manifest_xxh3)
      .def("transforms_identity", &LoaderCore::transforms_identity)
      .def("record_count", [](const LoaderCore& c) { return c.dataset().record_count(); })
      .def("shape",
           [](const LoaderCore& c) {
             const RecordSpec& s = c.dataset().spec();
             return py::make_tuple(s.channels, s.height, s.width);
           })
      .def("start", [](std::shared_ptr<LoaderCore> c, uint64_t epoch,
                       uint64_t step) { return std::make_unique<Pass>(std::move(c), epoch, step); })
      .def("_drain_epoch", &DrainEpochTimed)
      // The epoch whose pipeline works ahead, or None (docs/python.md, "Work ahead").
      .def("ahead_epoch", &LoaderCore::ahead_epoch);

  py::class_<PassRecord>(m, "_PassRecord").def("report_json", &PassRecord::ReportJson);
  py::class_<Pass>(m, "_Pass")
      .def("next", &Pass::Next, py::arg("cuda_stream") = 0)
      .def("cancel", &Pass::Cancel)
      .def("zero_copy_live", &Pass::zero_copy_live)
      .def("limit", &Pass::limit)
      .def("report_json", &Pass::ReportJson)
      .def("record", [](const Pass& p) { return PassRecord(p.Record(), UsableCores()); })
      .def("report_text", [](const Pass& p) { return p.Report().ToText(); })
      // (samples, seconds, samples/s) of the pass so far, as the report counts them (without
      // the rest of the report: it is read at every pass's end, inside the user's loop).
      .def("epoch_rate",
           [](const Pass& p) {
             const MeasuredRate r = MeasureRate(p.Record());
             return py::make_tuple(r.samples, r.seconds, r.samples_per_s);
           })
      // epochs: (epoch, samples, seconds, samples/s) of each finished pass.
      .def("report_html",
           [](const Pass& p, const std::string& path,
              const std::vector<std::tuple<uint64_t, uint64_t, double, double>>& epochs) {
             std::vector<EpochRate> rates;
             for (const auto& [epoch, samples, seconds, rate] : epochs) {
               rates.push_back({epoch, samples, seconds, rate});
             }
             p.WriteReportHtml(path, std::move(rates));
           })
      .def("stats_json", &Pass::CorruptionStats)
      // Whether the pass has no batch left (Pass::Exhausted; waits, the GIL released).
      .def("exhausted", &Pass::Exhausted)
      // (records skipped, samples delivered, corrupt messages) of the steps this pass delivered
      // (Pass::skipped_records): what an epoch's budget carries from a pass left at a break.
      .def("corrupt_counts",
           [](const Pass& p) {
             return py::make_tuple(p.skipped_records(), p.delivered_samples(),
                                   p.Record().pipeline.corrupt_frames);
           })
      // max_corrupt_fraction at the end of an epoch: DataLossError when more than `limit` of
      // the records read were skipped as corrupt, worded as engine/job/corrupt_fraction.h
      // words it for the Loader (sluice-train's --max-corrupt-fraction is the same check). The
      // epoch is this pass and the passes before it that a break left (prior_*: their counts,
      // Loader.__iter__), so a break and a continuing pass are one epoch, each record once.
      .def(
          "check_corrupt_fraction",
          [](const Pass& p, const std::string& manifest, uint64_t epoch, double limit,
             uint64_t prior_skipped, uint64_t prior_read, std::vector<std::string> messages) {
            const std::vector<std::string> mine = p.Record().pipeline.corrupt_frames;
            messages.insert(messages.end(), mine.begin(), mine.end());
            Check(CheckPassCorruptFraction(epoch,
                                           {manifest, prior_skipped + p.skipped_records(),
                                            prior_read + p.delivered_samples(), &messages},
                                           limit));
          },
          py::arg("manifest"), py::arg("epoch"), py::arg("limit"), py::arg("prior_skipped") = 0,
          py::arg("prior_read") = 0, py::arg("prior_messages") = std::vector<std::string>());
}

void BindDataset(py::module_& m) {
  py::class_<PyDataset>(m, "Dataset")
      .def(py::init<const py::object&, const py::object&>(), py::arg("path"),
           py::arg("split") = py::none())
      .def("__len__", &PyDataset::size)
      .def("__getitem__", &PyDataset::GetItem)
      .def("verify", &PyDataset::Verify,
           "Checks every shard's header, size and whole-file XXH3 and every frame's checksum, "
           "as `sluice-shard verify`; raises DataLossError naming file, frame and offset.")
      .def_property_readonly("manifest_path",
                             [](const PyDataset& d) { return d.dataset().manifest_path(); })
      .def_property_readonly("split",
                             [](const PyDataset& d) { return d.dataset().manifest().split; })
      .def_property_readonly("shape",
                             [](const PyDataset& d) -> py::object {
                               const RecordSpec& s = d.dataset().spec();
                               if (s.encoded()) return py::none();  // images of any size
                               return py::make_tuple(s.height, s.width, s.channels);
                             })
      .def_property_readonly("encoding",
                             [](const PyDataset& d) {
                               return std::string(SampleEncodingName(d.dataset().spec().encoding));
                             })
      .def_property_readonly("classes",
                             [](const PyDataset& d) { return d.dataset().manifest().class_names; })
      // Records per class, index = label; None when the manifest has no count (written before
      // label.class_counts existed, or more classes than it counts).
      .def_property_readonly("class_counts",
                             [](const PyDataset& d) -> py::object {
                               const auto& counts = d.dataset().manifest().class_counts;
                               if (counts.empty()) return py::none();
                               return py::cast(counts);
                             })
      // As torchvision's ImageFolder: each class name to its label.
      .def_property_readonly("class_to_idx",
                             [](const PyDataset& d) {
                               py::dict out;
                               const auto& names = d.dataset().manifest().class_names;
                               for (size_t i = 0; i < names.size(); ++i) {
                                 out[py::str(names[i])] = py::int_(i);
                               }
                               return out;
                             })
      .def_property_readonly("sources",
                             [](const PyDataset& d) -> py::object {
                               // record_sources: each record's file, or None when not recorded
                               const auto& s = d.dataset().manifest().record_sources;
                               if (s.empty()) return py::none();
                               return py::cast(s);
                             })
      .def_property_readonly("dtype", [](const PyDataset& d) {
        return std::string(SampleDTypeName(d.dataset().spec().sample_dtype));
      });
}

void BindFunctions(py::module_& m) {
  m.def("write_dataset", &WriteDatasetFromArrays, py::arg("out"), py::arg("split"),
        py::arg("images"), py::arg("labels"), py::arg("records_per_shard") = 16384,
        py::arg("records_per_frame") = 256, py::arg("zstd_level") = 3, py::arg("threads") = 0,
        py::arg("layout") = "", py::arg("num_classes") = 0);
  m.def("write_encoded_dataset", &WriteDatasetFromEncoded, py::arg("out"), py::arg("split"),
        py::arg("images"), py::arg("labels"), py::arg("records_per_shard"),
        py::arg("records_per_frame"), py::arg("frame_bytes"), py::arg("codec"),
        py::arg("zstd_level"), py::arg("threads"), py::arg("num_classes"), py::arg("classes"),
        py::arg("sources"), py::arg("max_image_pixels"), py::arg("verify_images"));
  // The manifest of `split` of `path` (python/src/dataset.h), for sluice.Loader's split=.
  m.def("_split_manifest", [](const std::string& path, const std::optional<std::string>& split) {
    return FsPathToPython(Unwrap(SplitManifestPath(path, split)));
  });
  // The stages of the bottleneck report's rows, in flow order (report/stages.h's table): the
  // tests read them rather than keep a list of their own.
  m.def("_report_stage_names", [] {
    std::vector<std::string> names;
    for (const StageInfo& info : kReportStageTable) names.emplace_back(info.name);
    return names;
  });
  m.def("cuda_device_count", &device::CudaDeviceCount);
  // (platform, ordinal or -1) of a device name, "auto" resolved: the grammar of --device
  // (device/device_spec.h). ValueError naming the grammar otherwise.
  m.def("parse_device", [](const std::string& text) {
    absl::StatusOr<device::DeviceSpec> spec = device::ParseDeviceSpec(text);
    if (!spec.ok()) {
      RaiseStatus(absl::InvalidArgumentError(absl::StrCat("device: ", spec.status().message())));
    }
    const device::DeviceSpec resolved = spec->Resolve();
    return py::make_tuple(std::string(device::PlatformName(resolved.platform)), resolved.ordinal);
  });
  m.def("cuda_device_status", [](int ordinal) {
    absl::Status s = device::CudaDeviceStatus(ordinal);
    return s.ok() ? std::string() : std::string(s.message());
  });
}

}  // namespace
}  // namespace sluice::python

PYBIND11_MODULE(_sluice, m) {
  // sluice.Loader's default, the same as sluice-train's --device-ring-depth.
  m.attr("DEFAULT_DEVICE_RING_DEPTH") = sluice::kDefaultDeviceRingDepth;
  // write_dataset's max_image_pixels, the same as sluice-shard create's --max-image-pixels.
  m.attr("DEFAULT_MAX_IMAGE_PIXELS") = sluice::kDefaultMaxImagePixels;
  // [min, max] of the Loader's resource arguments (pipeline/resource_limits.h), for the message
  // of a value that int64 cannot carry to CheckResourceSettings.
  const auto range = [](int64_t min, int64_t max) { return pybind11::make_tuple(min, max); };
  pybind11::dict ranges;
  for (const char* threads : {"threads", "decompress_threads", "preprocess_threads"}) {
    ranges[threads] = range(0, sluice::MaxThreads());
  }
  ranges["pool_size"] = range(0, sluice::kMaxPoolSize);
  ranges["read_ahead_frames"] = range(0, sluice::kMaxReadAheadFrames);
  ranges["device_ring_depth"] = range(sluice::kMinDeviceRingDepth, sluice::kMaxDeviceRingDepth);
  m.attr("RESOURCE_RANGES") = ranges;
  m.doc() = "sluice's C++ core (use the `sluice` package)";
  sluice::python::RegisterExceptions(m);
  sluice::python::BindLoader(m);
  sluice::python::BindDataset(m);
  sluice::python::BindFunctions(m);
  sluice::python::BindProbe(m);
  sluice::python::BindAdviceCheck(m);
  sluice::python::BindTransforms(m);
}
