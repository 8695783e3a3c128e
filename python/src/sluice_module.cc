// _sluice: the Python binding of the pipeline, the bottleneck report and the shard storage.
// python/sluice/__init__.py wraps it into the public API (docs/python.md).
//
// Batches cross to PyTorch as DLPack capsules that own a lease on a pipeline buffer (zero
// copy). The capsule's deleter may run on any thread, with or without the GIL: it touches no
// Python object, it only releases the lease (on CUDA after an event recorded on the consumer's
// stream). Only this file turns an absl::Status into a Python exception (RaiseStatus).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/limits.h"
#include "device/device.h"
#include "device/sim/sim_device.h"
#include "dlpack/dlpack.h"
#include "engine/diagnostics/bottleneck_report.h"
#include "engine/diagnostics/run_record.h"
#include "pipeline/pipeline.h"
#include "pipeline/stage_stats.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "pybind11/numpy.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "storage/shard_reader.h"
#ifdef SLUICE_DEVICE_CUDA
#include "device/cuda/cuda_device.h"
#endif

namespace py = pybind11;

namespace sluice::python {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors: absl::Status -> Python exception, message unchanged (docs/python.md, "Errors").

PyObject* g_data_loss_error = nullptr;  // sluice.DataLossError, a subclass of OSError

[[noreturn]] void RaiseStatus(const absl::Status& s) {
  const std::string msg(s.message());
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case absl::StatusCode::kPermissionDenied:
      type = PyExc_PermissionError;
      break;
    case absl::StatusCode::kAlreadyExists:
      type = PyExc_FileExistsError;
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      type = PyExc_OSError;
      break;
    case absl::StatusCode::kDataLoss:
      type = g_data_loss_error;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      type = PyExc_TimeoutError;
      break;
    default:  // kInternal (a failed device call), kUnknown, kCancelled, ...
      type = PyExc_RuntimeError;
      break;
  }
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

void Check(const absl::Status& s) {
  if (!s.ok()) RaiseStatus(s);
}
template <typename T>
T Unwrap(absl::StatusOr<T> s) {
  if (!s.ok()) RaiseStatus(s.status());
  return std::move(*s);
}

// ---------------------------------------------------------------------------------------------
// Runs and leases.

// One pass of the loader (one epoch, or its tail after a resume). Shared by the pass and by
// every batch handed out, so the pipeline's memory, the device and the dataset stay alive
// while a tensor still points into them.
struct Run {
  std::shared_ptr<device::Device> device;  // null: host batches
  std::shared_ptr<const Dataset> dataset;
  std::unique_ptr<Pipeline> pipeline;      // declared last: destroyed first
  std::atomic<int> zero_copy_live{0};      // batches handed out without a copy, still alive
  std::mutex mu;
  std::set<uint64_t> live_ids;             // batch ids of the leases still held
  ~Run() { pipeline.reset(); }
};

// Owns one lease. Destroyed by the last DLPack deleter of the batch's tensors, on any thread.
struct LeaseHolder {
  std::shared_ptr<Run> run;
  BatchLease lease;
  std::unique_ptr<device::Stream> consumer;  // CUDA: the consumer's stream (borrowed)
  ~LeaseHolder() {
    const bool held = lease.valid();
    const uint64_t id = lease.batch_id();
    lease.Release(consumer.get());  // CUDA: the slot returns once the consumer's work is done
    consumer.reset();
    if (held) {
      std::lock_guard<std::mutex> l(run->mu);
      run->live_ids.erase(id);
    }
    run->zero_copy_live.fetch_sub(1, std::memory_order_acq_rel);
  }
};

struct TensorContext {
  std::shared_ptr<LeaseHolder> holder;
  int64_t shape[4] = {};
  int64_t strides[4] = {};
  DLManagedTensor managed{};
};

void DeleteTensor(DLManagedTensor* t) { delete static_cast<TensorContext*>(t->manager_ctx); }

// A capsule that nobody consumed still owns its tensor: free it when the capsule dies. This
// runs while an exception may be propagating (a KeyboardInterrupt unwinding the frame that
// held the capsule): it must neither clear nor set the error indicator.
void DeleteUnusedCapsule(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, "dltensor")) {  // not renamed "used_dltensor" by a consumer
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Restore(type, value, traceback);
}

py::object MakeCapsule(std::shared_ptr<LeaseHolder> holder, void* data, DLDataType dtype,
                       DLDevice dev, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides) {
  auto* ctx = new TensorContext;
  ctx->holder = std::move(holder);
  for (size_t i = 0; i < shape.size(); ++i) {
    ctx->shape[i] = shape[i];
    ctx->strides[i] = strides[i];
  }
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = data;
  t.device = dev;
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = ctx->shape;
  t.strides = ctx->strides;
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = DeleteTensor;
  PyObject* cap = PyCapsule_New(&ctx->managed, "dltensor", DeleteUnusedCapsule);
  if (cap == nullptr) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

// ---------------------------------------------------------------------------------------------
// Loader core: the options, the dataset and the device, fixed for the loader's life.

struct LoaderConfig {
  std::string path;
  OrderSpec order;
  BatchFormat format;
  DataParallelSlice slice;
  OnCorrupt on_corrupt = OnCorrupt::kFail;
  int threads = 0;
  uint32_t pool_size = 0;
  uint32_t device_ring_depth = 8;
  bool device_zero_copy = true;  // device batches: zero copy (false: the caller copies each)
  std::string device = "cpu";  // cpu | sim | cuda:N
};

// The consumer side of one pass, for the report: the Python code between next() calls.
struct ConsumerClock {
  bool started = false;
  int64_t last_return_ns = 0;  // when next() last returned a batch
  uint32_t last_size = 0;
  ComputeStats stats;
};

class Pass;

class LoaderCore : public std::enable_shared_from_this<LoaderCore> {
 public:
  static std::shared_ptr<LoaderCore> Create(const LoaderConfig& c) {
    auto core = std::shared_ptr<LoaderCore>(new LoaderCore(c));
    std::unique_ptr<Dataset> ds;
    {
      py::gil_scoped_release nogil;
      absl::StatusOr<std::unique_ptr<Dataset>> opened = Dataset::Open(Env::Default(), c.path);
      if (!opened.ok()) {
        py::gil_scoped_acquire gil;
        RaiseStatus(opened.status());
      }
      ds = std::move(*opened);
    }
    core->dataset_ = std::move(ds);
    if (c.device == "sim") {
      core->device_ = Unwrap(device::OpenSimDevice(device::SimOptions{}));
    } else if (c.device.rfind("cuda:", 0) == 0) {
      const int ordinal = std::stoi(c.device.substr(5));
      core->device_ = Unwrap(device::OpenCudaDevice(ordinal));
      core->cuda_ordinal_ = ordinal;
    } else if (c.device != "cpu") {
      RaiseStatus(absl::InvalidArgumentError(
          absl::StrCat("device: '", c.device, "' is not cpu, sim, cuda or cuda:N")));
    }
    // Validate the options once, now, rather than at the first iteration.
    core->Options(0, 0);
    return core;
  }

  PipelineOptions Options(uint64_t epoch, uint64_t step) const {
    PipelineOptions o;
    o.order = config_.order;
    o.format = config_.format;
    o.slice = config_.slice;
    o.on_corrupt = config_.on_corrupt;
    o.resources.threads = config_.threads;
    o.resources.pool_size = config_.pool_size;
    o.resources.device_ring_depth = config_.device_ring_depth;
    o.placement.device = device_.get();
    o.span.start_epoch = epoch;
    o.span.start_step = step;
    o.span.epochs = 1;
    return o;
  }

  uint64_t steps_per_epoch() const {
    const uint64_t n = dataset_->record_count();
    const uint64_t b = config_.order.batch_size;
    if (b == 0) return 0;
    return config_.order.drop_last ? n / b : (n + b - 1) / b;
  }
  const Dataset& dataset() const { return *dataset_; }
  const LoaderConfig& config() const { return config_; }
  bool on_device() const { return device_ != nullptr; }
  bool is_cuda() const { return cuda_ordinal_ >= 0; }
  int cuda_ordinal() const { return cuda_ordinal_; }
  std::shared_ptr<device::Device> device() const { return device_; }
  std::shared_ptr<const Dataset> dataset_ptr() const { return dataset_; }

 private:
  explicit LoaderCore(LoaderConfig c) : config_(std::move(c)) {}
  LoaderConfig config_;
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<device::Device> device_;
  int cuda_ordinal_ = -1;
};

// The batch shape: [B, C, H, W] (torchvision's ToTensor layout) over the record's H x W x C
// values (IDX order), as strides, so channels > 1 are a zero-copy strided view.
void ImageShape(const RecordSpec& spec, uint32_t size, size_t elem, std::vector<int64_t>* shape,
                std::vector<int64_t>* strides) {
  const int64_t h = spec.height, w = spec.width, c = spec.channels;
  *shape = {static_cast<int64_t>(size), c, h, w};
  *strides = {h * w * c, 1, w * c, c};
  (void)elem;
}

DLDataType DLType(H2DFormat f) {
  switch (f) {
    case H2DFormat::kU8:
      return DLDataType{kDLUInt, 8, 1};
    case H2DFormat::kF16:
      return DLDataType{kDLFloat, 16, 1};
    case H2DFormat::kF32:
      break;
  }
  return DLDataType{kDLFloat, 32, 1};
}

// One pass over an epoch (or its tail). Iterated by the Python Loader; next() releases the GIL
// while it waits, in slices of 50 ms, checking for signals (Ctrl-C) between slices.
class Pass {
 public:
  Pass(std::shared_ptr<LoaderCore> core, uint64_t epoch, uint64_t step) : core_(std::move(core)) {
    run_ = std::make_shared<Run>();
    run_->device = core_->device();
    run_->dataset = core_->dataset_ptr();
    const PipelineOptions o = core_->Options(epoch, step);
    absl::StatusOr<std::unique_ptr<Pipeline>> p;
    {
      py::gil_scoped_release nogil;
      p = Pipeline::Create(run_->dataset.get(), o);
    }
    run_->pipeline = Unwrap(std::move(p));
    limit_ = core_->on_device() ? o.resources.device_ring_depth
                                : run_->pipeline->options().resources.pool_size;
  }
  ~Pass() { Cancel(); }

  // None at the end of the pass; else (images capsule, labels capsule, copy, epoch, step).
  // `copy`: the caller must copy the images and drop the capsule's tensor (the kept-batch
  // policy: more than half of the pipeline's buffers are held by the caller already).
  // `cuda_stream`: the consumer's current cudaStream_t (CUDA loaders; 0 = legacy default).
  py::object Next(uint64_t cuda_stream) {
    if (done_) return py::none();
    if (core_->on_device() && core_->config().device_zero_copy) CheckRingNotBlocked();
    const int64_t entered = NowNs();
    if (clock_.started) {  // the Python code since the last batch: the compute stage
      clock_.stats.busy_ns += entered - clock_.last_return_ns;
      clock_.stats.enqueue_ns += entered - clock_.last_return_ns;
      clock_.stats.steps += 1;
      clock_.stats.samples += clock_.last_size;
      clock_.stats.last_end_ns = entered;
    }
    auto holder = std::make_shared<LeaseHolder>();
    holder->run = run_;
    run_->zero_copy_live.fetch_add(1, std::memory_order_acq_rel);  // undone by ~LeaseHolder
    const int live_before = run_->zero_copy_live.load(std::memory_order_acquire) - 1;
    while (true) {
      absl::StatusOr<bool> got;
      {
        py::gil_scoped_release nogil;
        got = run_->pipeline->NextFor(&holder->lease, absl::Milliseconds(50));
      }
      if (absl::IsDeadlineExceeded(got.status())) {
        if (PyErr_CheckSignals() != 0) {  // Ctrl-C: stop the pipeline, raise KeyboardInterrupt
          Cancel();
          throw py::error_already_set();
        }
        continue;
      }
      if (!got.ok()) {
        done_ = true;
        RaiseStatus(got.status());
      }
      if (!*got) {
        done_ = true;
        return py::none();
      }
      break;
    }
    const BatchView& v = holder->lease.view();
    const RecordSpec& spec = core_->dataset().spec();
    last_id_ = holder->lease.batch_id();
    {
      std::lock_guard<std::mutex> l(run_->mu);
      run_->live_ids.insert(last_id_);
    }
    DLDevice dev{kDLCPU, 0};
    if (v.on_device) {
      if (core_->is_cuda()) {
#ifdef SLUICE_DEVICE_CUDA
        holder->consumer = device::BorrowCudaStream(core_->cuda_ordinal(),
                                                    reinterpret_cast<cudaStream_t>(cuda_stream));
        if (v.ready_event != nullptr) Check(holder->consumer->Wait(v.ready_event));
        dev = DLDevice{kDLCUDA, core_->cuda_ordinal()};
#endif
      } else if (v.ready_event != nullptr) {
        // The simulated device's memory is host memory: torch reads it on the CPU at once.
        absl::Status s;
        {
          py::gil_scoped_release nogil;
          s = v.ready_event->Synchronize();
        }
        Check(s);
      }
    }
    std::vector<int64_t> shape, strides;
    ImageShape(spec, v.size, H2DFormatSize(v.format), &shape, &strides);
    py::object images = MakeCapsule(holder, const_cast<void*>(v.samples), DLType(v.format), dev,
                                    shape, strides);
    py::object labels = MakeCapsule(holder, const_cast<int32_t*>(v.labels),
                                    DLDataType{kDLInt, 32, 1}, dev, {int64_t{v.size}}, {1});
    // The kept-batch policy (docs/python.md, "Zero copy"). Host batches: zero copy while the
    // caller holds fewer than half of the pinned buffers, then copies (the pipeline keeps at
    // least half of its buffers). Device batches: a ring whose slot is reused `depth` batches
    // later, so a kept batch cannot be worked around: zero copy (CheckRingNotBlocked) or,
    // with device_zero_copy=False, a copy of every batch on the consumer's stream.
    const bool copy = core_->on_device() ? !core_->config().device_zero_copy
                                         : live_before >= static_cast<int>(limit_ / 2);
    const uint64_t epoch = v.epoch, step = v.step;
    const uint32_t size = v.size;
    holder.reset();
    const int64_t now = NowNs();
    if (!clock_.started) {
      clock_.started = true;
      clock_.stats.first_start_ns = now;
      clock_.stats.last_end_ns = now;
    }
    clock_.last_return_ns = now;
    clock_.last_size = size;
    return py::make_tuple(images, labels, copy, epoch, step);
  }

  void Cancel() {
    if (run_ && run_->pipeline) run_->pipeline->Cancel();
  }

  // Device batch `id` uploads into the slot of batch id - depth once that lease is released:
  // a caller still holding it would wait forever. Say so instead.
  void CheckRingNotBlocked() {
    if (last_id_ == UINT64_MAX) return;
    const uint64_t next = last_id_ + 1, depth = limit_;
    std::lock_guard<std::mutex> l(run_->mu);
    if (run_->live_ids.empty() || next < depth || *run_->live_ids.begin() > next - depth) return;
    RaiseStatus(absl::FailedPreconditionError(absl::StrCat(
        "the caller still holds device batch ", *run_->live_ids.begin(), " of this pass, whose "
        "slot the next batch needs (a ring of device_ring_depth=", depth, " slots): free batches "
        "within ", depth - 1, " later ones, copy the ones you keep (x.clone()), or pass "
        "device_zero_copy=False")));
  }

  // The report of this pass so far, with the Python consumer as the compute stage.
  BottleneckReport Report() const {
    RunRecord r;
    r.pipeline = run_->pipeline->Stats();
    r.compute = clock_.stats;
    r.compute.device = Consumer();
    r.device = r.compute.device;
    r.samples = r.compute.samples;
    r.train_seconds = (r.compute.last_end_ns - r.compute.first_start_ns) * 1e-9;
    r.rank = static_cast<int>(core_->config().slice.rank);
    r.world_size = static_cast<int>(core_->config().slice.world_size);
    return AnalyzeRun(r, nullptr, UsableCores());
  }

  int zero_copy_live() const { return run_->zero_copy_live.load(); }
  uint32_t limit() const { return limit_; }

 private:
  std::string Consumer() const {
    return absl::StrCat("python consumer (batches on ", core_->config().device, ")");
  }
  std::shared_ptr<LoaderCore> core_;
  std::shared_ptr<Run> run_;
  uint32_t limit_ = 0;
  uint64_t last_id_ = UINT64_MAX;  // the batch id last handed out
  bool done_ = false;
  ConsumerClock clock_;
};

py::object JsonToPython(const nlohmann::ordered_json& j) {
  py::module_ json = py::module_::import("json");
  return json.attr("loads")(j.dump());
}

// ---------------------------------------------------------------------------------------------
// Datasets from Python.

class PyDataset {
 public:
  PyDataset(const std::string& path, const std::string& split) {
    absl::StatusOr<std::unique_ptr<Dataset>> ds;
    {
      py::gil_scoped_release nogil;
      ds = Dataset::Open(Env::Default(), path, split);
    }
    ds_ = Unwrap(std::move(ds));
  }
  uint64_t size() const { return ds_->record_count(); }

  // Record `i` as (np.ndarray [H, W] or [H, W, C], int label). Decodes (and checksums) the
  // frame holding it; the last frame is kept, so sequential access decodes each frame once.
  py::tuple Get(int64_t index) {
    const int64_t n = static_cast<int64_t>(ds_->record_count());
    if (index < 0) index += n;
    if (index < 0 || index >= n) {
      throw py::index_error(absl::StrCat("record index ", index, " out of range for ",
                                         ds_->manifest_path(), " (", n, " records)"));
    }
    const auto& shards = ds_->manifest().shards;
    size_t s = 0;
    while (s + 1 < shards.size() && shards[s + 1].first_record <= static_cast<uint64_t>(index)) ++s;
    const ShardReader* r = Unwrap(ds_->shard(s));
    const uint64_t in_shard = static_cast<uint64_t>(index) - shards[s].first_record;
    const auto& frames = r->frames();
    uint32_t f = 0;
    while (f + 1 < frames.size() && frames[f + 1].first_record <= in_shard) ++f;
    if (s != cached_shard_ || f != cached_frame_) {
      absl::Status st;
      {
        py::gil_scoped_release nogil;
        st = r->ReadFrame(f, &frame_);
      }
      cached_shard_ = SIZE_MAX;
      Check(st);
      cached_shard_ = s;
      cached_frame_ = f;
    }
    const RecordSpec& spec = ds_->spec();
    const uint32_t records = frames[f].record_count;
    const uint64_t k = in_shard - frames[f].first_record;
    const char* sample = frame_.data() + k * spec.sample_bytes();
    const char* label = frame_.data() + size_t{records} * spec.sample_bytes() + k * spec.label_bytes();
    std::vector<py::ssize_t> shape = {spec.height, spec.width};
    if (spec.channels != 1) shape.push_back(spec.channels);
    py::array arr = spec.sample_dtype == SampleDType::kU8
                        ? py::array(py::dtype::of<uint8_t>(), shape)
                        : py::array(py::dtype::of<float>(), shape);
    std::memcpy(arr.mutable_data(), sample, spec.sample_bytes());
    int64_t lab = 0;
    if (spec.label_dtype == LabelDType::kU8) {
      lab = static_cast<uint8_t>(*label);
    } else {
      int32_t v;
      std::memcpy(&v, label, 4);
      lab = v;
    }
    return py::make_tuple(arr, lab);
  }

  void Verify() const {
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = VerifyDataset(*ds_);
    }
    Check(s);
  }
  const Dataset& dataset() const { return *ds_; }

 private:
  std::unique_ptr<Dataset> ds_;
  std::string frame_;
  size_t cached_shard_ = SIZE_MAX;
  uint32_t cached_frame_ = 0;
};

// write_dataset(out, split, images, labels, ...): images uint8/float32 [N, H, W] or
// [N, H, W, C]; labels uint8/int32/int64 [N] (int64 must fit in int32).
py::dict WriteDatasetFromArrays(const std::string& out, const std::string& split,
                                py::array images, py::array labels, uint64_t records_per_shard,
                                uint32_t records_per_frame, int zstd_level, int threads) {
  RecordArrays r;
  if (images.ndim() != 3 && images.ndim() != 4) {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat(
        "images: expected an array of shape [N, H, W] or [N, H, W, C], got ", images.ndim(),
        " dimensions")));
  }
  if (labels.ndim() != 1 || labels.shape(0) != images.shape(0)) {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat(
        "labels: expected an array of shape [N] with N = ", images.shape(0),
        " (the number of images)")));
  }
  if (images.dtype().is(py::dtype::of<uint8_t>())) {
    r.spec.sample_dtype = SampleDType::kU8;
  } else if (images.dtype().is(py::dtype::of<float>())) {
    r.spec.sample_dtype = SampleDType::kF32;
  } else {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat(
        "images: dtype must be uint8 or float32, got ", py::str(images.dtype()).cast<std::string>())));
  }
  r.count = static_cast<uint64_t>(images.shape(0));
  r.spec.height = static_cast<uint32_t>(images.shape(1));
  r.spec.width = static_cast<uint32_t>(images.shape(2));
  r.spec.channels = images.ndim() == 4 ? static_cast<uint32_t>(images.shape(3)) : 1;
  py::array contiguous = py::array::ensure(images, py::array::c_style);
  r.samples.assign(static_cast<const char*>(contiguous.data()),
                   r.count * r.spec.sample_bytes());
  if (labels.dtype().is(py::dtype::of<uint8_t>())) {
    r.spec.label_dtype = LabelDType::kU8;
    py::array l = py::array::ensure(labels, py::array::c_style);
    r.labels.assign(static_cast<const char*>(l.data()), r.count);
  } else if (labels.dtype().is(py::dtype::of<int32_t>()) ||
             labels.dtype().is(py::dtype::of<int64_t>())) {
    r.spec.label_dtype = LabelDType::kI32;
    py::array_t<int64_t, py::array::c_style | py::array::forcecast> l(labels);
    r.labels.resize(r.count * 4);
    for (uint64_t i = 0; i < r.count; ++i) {
      const int64_t v = l.at(static_cast<py::ssize_t>(i));
      if (v < INT32_MIN || v > INT32_MAX) {
        RaiseStatus(absl::InvalidArgumentError(
            absl::StrCat("labels[", i, "] = ", v, " does not fit in int32")));
      }
      const int32_t v32 = static_cast<int32_t>(v);
      std::memcpy(r.labels.data() + i * 4, &v32, 4);
    }
  } else {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat(
        "labels: dtype must be uint8, int32 or int64, got ",
        py::str(labels.dtype()).cast<std::string>())));
  }
  WriteDatasetOptions o;
  o.sharding.records_per_shard = records_per_shard;
  o.sharding.records_per_frame = records_per_frame;
  o.sharding.zstd_level = zstd_level;
  o.threads = threads;
  absl::StatusOr<Manifest> m;
  {
    py::gil_scoped_release nogil;
    m = WriteDataset(Env::Default(), out, split, r, o);
  }
  Manifest manifest = Unwrap(std::move(m));
  py::dict d;
  d["split"] = manifest.split;
  d["records"] = manifest.record_count;
  d["shards"] = manifest.shards.size();
  return d;
}

}  // namespace
}  // namespace sluice::python

using namespace sluice;          // NOLINT: the module definition below names many of them
using namespace sluice::python;  // NOLINT

PYBIND11_MODULE(_sluice, m) {
  m.doc() = "sluice's C++ core (use the `sluice` package)";
  static py::exception<void> data_loss(m, "DataLossError", PyExc_OSError);
  g_data_loss_error = data_loss.ptr();

  py::class_<LoaderCore, std::shared_ptr<LoaderCore>>(m, "_LoaderCore")
      .def(py::init([](const std::string& path, uint32_t batch_size, bool shuffle, uint64_t seed,
                       uint32_t window, bool drop_last, const std::string& device,
                       const std::string& format, float mean, float std, int threads,
                       uint32_t rank, uint32_t world_size, const std::string& on_corrupt,
                       uint32_t pool_size, uint32_t device_ring_depth, bool device_zero_copy) {
             LoaderConfig c;
             c.path = path;
             c.order.batch_size = batch_size;
             c.order.shuffle = shuffle;
             c.order.seed = seed;
             c.order.shuffle_window_frames = window;
             c.order.drop_last = drop_last;
             c.device = device;
             c.format.h2d_format = Unwrap(ParseH2DFormat(format));
             c.format.normalization = Normalization{mean, std};
             c.threads = threads;
             c.slice = DataParallelSlice{rank, world_size};
             c.on_corrupt = Unwrap(ParseOnCorrupt(on_corrupt));
             c.pool_size = pool_size;
             c.device_ring_depth = device_ring_depth;
             c.device_zero_copy = device_zero_copy;
             return LoaderCore::Create(c);
           }))
      .def("steps_per_epoch", &LoaderCore::steps_per_epoch)
      .def("record_count", [](const LoaderCore& c) { return c.dataset().record_count(); })
      .def("shape", [](const LoaderCore& c) {
        const RecordSpec& s = c.dataset().spec();
        return py::make_tuple(s.channels, s.height, s.width);
      })
      .def("start", [](std::shared_ptr<LoaderCore> c, uint64_t epoch, uint64_t step) {
        return std::make_unique<Pass>(std::move(c), epoch, step);
      });

  py::class_<Pass>(m, "_Pass")
      .def("next", &Pass::Next, py::arg("cuda_stream") = 0)
      .def("cancel", &Pass::Cancel)
      .def("zero_copy_live", &Pass::zero_copy_live)
      .def("limit", &Pass::limit)
      .def("report_json", [](const Pass& p) { return JsonToPython(p.Report().ToJson()); })
      .def("report_text", [](const Pass& p) { return p.Report().ToText(); })
      .def("stats_json", [](const Pass& p) {
        const BottleneckReport r = p.Report();
        py::dict d;
        d["skipped_frames"] = r.pipeline.skipped_frames;
        d["skipped_records"] = r.pipeline.skipped_records;
        d["corrupt_frames"] = r.pipeline.corrupt_frames;
        return d;
      });

  py::class_<PyDataset>(m, "Dataset")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"),
           py::arg("split") = "train")
      .def("__len__", &PyDataset::size)
      .def("__getitem__", &PyDataset::Get)
      .def("verify", &PyDataset::Verify,
           "Checks every shard's header, size and whole-file XXH3 and every frame's checksum, "
           "as `sluice-shard verify`; raises DataLossError naming file, frame and offset.")
      .def_property_readonly("manifest_path",
                             [](const PyDataset& d) { return d.dataset().manifest_path(); })
      .def_property_readonly("split", [](const PyDataset& d) { return d.dataset().manifest().split; })
      .def_property_readonly("shape", [](const PyDataset& d) {
        const RecordSpec& s = d.dataset().spec();
        return py::make_tuple(s.height, s.width, s.channels);
      })
      .def_property_readonly("dtype", [](const PyDataset& d) {
        return std::string(SampleDTypeName(d.dataset().spec().sample_dtype));
      });

  m.def("write_dataset", &WriteDatasetFromArrays, py::arg("out"), py::arg("split"),
        py::arg("images"), py::arg("labels"), py::arg("records_per_shard") = 16384,
        py::arg("records_per_frame") = 256, py::arg("zstd_level") = 3, py::arg("threads") = 0);
  m.def("cuda_device_count", &device::CudaDeviceCount);
  m.def("cuda_device_status", [](int ordinal) {
    absl::Status s = device::CudaDeviceStatus(ordinal);
    return s.ok() ? std::string() : std::string(s.message());
  });
}
