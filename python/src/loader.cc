#include "python/src/loader.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/cpu_load.h"
#include "common/env.h"
#include "common/limits.h"
#include "device/device_spec.h"
#include "device/sim/sim_device.h"
#include "pipeline/batch_format.h"
#include "pipeline/resource_limits.h"
#include "pipeline/stage_stats.h"
#include "pybind11/stl.h"  // stats_json: corrupt_frames, a std::vector<std::string>
#include "python/src/dlpack.h"
#include "python/src/errors.h"
#include "python/src/fork_guard.h"
#include "report/render/html.h"
#include "storage/dataset_files.h"
#include "storage/remote/remote_env.h"
#ifdef SLUICE_DEVICE_CUDA
#include "device/cuda/cuda_device.h"
#endif

namespace py = pybind11;

namespace sluice::python {
namespace {

// How long next() waits with the GIL released before it checks for signals (Ctrl-C).
constexpr absl::Duration kSignalCheckInterval = absl::Milliseconds(50);

py::object JsonToPython(const nlohmann::ordered_json& j) {
  py::module_ json = py::module_::import("json");
  return json.attr("loads")(j.dump());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LoaderCore

std::shared_ptr<LoaderCore> LoaderCore::Create(const LoaderConfig& c) {
  CheckNotForked("sluice.Loader");
  auto core = std::shared_ptr<LoaderCore>(new LoaderCore(c));
  std::unique_ptr<Dataset> ds;
  {
    py::gil_scoped_release nogil;
    // Remote datasets (docs/storage.md): the process's remote reads take this Loader's
    // concurrency and cache.
    remote::RemoteOptions remote_options;
    remote_options.cache_dir = c.cache_dir;
    remote_options.cache_bytes = c.cache_bytes;
    remote::ConfigureRemote(remote_options);
    absl::StatusOr<std::unique_ptr<Dataset>> opened = Dataset::Open(remote::UrlEnv(), c.path);
    if (!opened.ok()) {
      py::gil_scoped_acquire gil;
      RaiseStatus(opened.status());
    }
    ds = std::move(*opened);
  }
  core->dataset_ = std::move(ds);
  // A mean or std of the wrong length is refused here, naming the channel count, not at the
  // first iteration. Encoded images have no stored channel count: ResolveBatchFormat checks
  // the normalization against the chain's output.
  if (!core->dataset_->spec().encoded()) {
    Check(CheckNormalization(c.format.normalization, core->dataset_->spec().channels));
  }
  // The transforms are built against the dataset's samples now: a bad op raises here.
  absl::StatusOr<ResolvedBatchFormat> format =
      ResolveBatchFormat(core->dataset_->spec(), c.format, SettingNames::kPythonArguments,
                         core->dataset_->manifest().image_bound);
  Check(format.status());
  absl::StatusOr<device::DeviceSpec> spec = device::ParseDeviceSpec(c.device);
  if (!spec.ok()) {
    RaiseStatus(absl::InvalidArgumentError(absl::StrCat("device: ", spec.status().message())));
  }
  const device::DeviceSpec resolved = spec->Resolve();
  const int ordinal = resolved.ordinal_or(0);
  if (resolved.platform != device::Platform::kCpu) NoteThreadsStarted();  // the device's own
  if (resolved.platform == device::Platform::kSim) {
    core->device_ = Unwrap(device::OpenSimDevice(device::SimOptions{}, ordinal));
  } else if (resolved.platform == device::Platform::kCuda) {
    core->device_ = Unwrap(device::OpenCudaDevice(ordinal));
    core->cuda_ordinal_ = ordinal;
  }
  // Validate the options once, now, rather than at the first iteration.
  Check(CheckPipelineMemory(core->Options(0, 0), core->dataset_->spec(),
                            SettingNames::kPythonArguments));
  return core;
}

LoaderCore::~LoaderCore() {
  // A fork() child: the device's threads are the parent's (fork_guard.h).
  if (ForkedAfterThreadsStarted()) new std::shared_ptr<device::Device>(std::move(device_));
}

absl::StatusOr<std::shared_ptr<Run>> LoaderCore::StartRun(uint64_t epoch, uint64_t step) {
  auto run = std::make_shared<Run>();
  run->device = device_;
  run->dataset = dataset_;
  const PipelineOptions o = Options(epoch, step);
  absl::StatusOr<std::unique_ptr<Pipeline>> p;
  {
    py::gil_scoped_release nogil;
    p = Pipeline::Create(run->dataset.get(), o);
  }
  if (!p.ok()) return p.status();
  run->pipeline = *std::move(p);
  SkipTbbTeardownInForkChildren();
  return run;
}

void LoaderCore::StartAhead(uint64_t epoch) {
  if (!config_.work_ahead || on_device() || ahead_ != nullptr) return;
  // The buffers of this pass are taken already: "available now" counts them.
  if (!CheckPipelineMemory(Options(epoch, 0), dataset_->spec(), SettingNames::kPythonArguments)
           .ok()) {
    return;
  }
  absl::StatusOr<std::shared_ptr<Run>> run = StartRun(epoch, 0);
  if (!run.ok()) return;  // the pass over `epoch` starts it again, and raises then
  ahead_ = *std::move(run);
  ahead_epoch_ = epoch;
}

std::shared_ptr<Run> LoaderCore::TakeAhead(uint64_t epoch, uint64_t step) {
  if (ahead_ == nullptr) return nullptr;
  if (ahead_epoch_ == epoch && step == 0) return std::move(ahead_);
  if (epoch < std::numeric_limits<uint64_t>::max() && ahead_epoch_ == epoch + 1) return nullptr;
  ahead_->pipeline->Cancel();
  ahead_.reset();
  return nullptr;
}

void LoaderCore::PassEnded() {
  if (ahead_ != nullptr) ahead_->pipeline->SetConsumerInSpan(false);
}

std::optional<uint64_t> LoaderCore::ahead_epoch() const {
  if (ahead_ == nullptr) return std::nullopt;
  return ahead_epoch_;
}

std::string LoaderCore::manifest_xxh3() const {
  return ChecksumToHex(Xxh3(dataset_->manifest().ToJson()));
}

PipelineOptions LoaderCore::Options(uint64_t epoch, uint64_t step) const {
  PipelineOptions o;
  o.order = config_.order;
  o.format = config_.format;
  o.slice = config_.slice;
  o.on_corrupt = config_.on_corrupt;
  o.resources.threads = config_.threads;
  o.resources.decompress_threads = config_.decompress_threads;
  o.resources.preprocess_threads = config_.preprocess_threads;
  o.resources.read_ahead_frames = config_.read_ahead_frames;
  o.resources.read_concurrency = config_.read_concurrency;
  o.resources.pool_size = config_.pool_size;
  o.resources.device_ring_depth = config_.device_ring_depth;
  o.resources.pool_cache = pool_cache_;
  o.placement.device = device_.get();
  o.span.start_epoch = epoch;
  o.span.start_step = step;
  o.span.epochs = 1;
  return o;
}

uint64_t LoaderCore::steps_per_epoch() const {
  return StepsPerEpoch(dataset_->record_count(), config_.order);
}

// ---------------------------------------------------------------------------------------------
// Leases and the consumer's clock

Run::~Run() {
  if (ForkedAfterThreadsStarted()) {  // a fork() child: leave the parent's threads alone
    (void)pipeline.release();
    new std::shared_ptr<device::Device>(std::move(device));
    return;
  }
  pipeline.reset();
}

LeaseHolder::~LeaseHolder() {
  if (ForkedAfterThreadsStarted()) {  // a fork() child: the buffer belongs to the parent's pipeline
    new BatchLease(std::move(lease));
    (void)consumer.release();
    new std::shared_ptr<Run>(std::move(run));
    return;
  }
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

void ConsumerClock::Requested(int64_t now) {
  stats_.first_start_ns = now;
  stats_.last_end_ns = now;
  // The timeline spans what the report's span does: from here, not from the first step. The
  // wait for the first batch (the pipeline's start-up; with shuffle, the window filling) is
  // most of a short pass's waiting, and a chart from the first step drew it as none.
  stats_.timeline.Open(now);
}

void ConsumerClock::Entered(int64_t now) {
  if (stats_.first_start_ns == 0) Requested(now);
  if (batch_out_) {
    stats_.timeline.AddCompute(last_return_ns_, now);
    stats_.busy_ns += now - last_return_ns_;
    stats_.step_latency.Add(now - last_return_ns_);
    stats_.enqueue_ns += now - last_return_ns_;
    // The step's CPU time, not its wall time: a step whose thread waited for a core (the
    // pipeline's threads on the same cores) is not that much work (docs/python.md, "Report").
    stats_.cpu_ns +=
        std::this_thread::get_id() == return_thread_
            ? std::clamp<int64_t>(ThreadCpuNs() - return_thread_cpu_ns_, 1, now - last_return_ns_)
            : now - last_return_ns_;
    stats_.steps += 1;
    stats_.samples += last_size_;
    stats_.last_end_ns = now;
    batch_out_ = false;
  }
}

void ConsumerClock::Returned(int64_t now, uint32_t size) {
  batch_out_ = true;
  last_return_ns_ = now;
  last_size_ = size;
  return_thread_ = std::this_thread::get_id();
  return_thread_cpu_ns_ = ThreadCpuNs();
}

// ---------------------------------------------------------------------------------------------
// Pass

Pass::Pass(std::shared_ptr<LoaderCore> core, uint64_t epoch, uint64_t step)
    : core_(std::move(core)) {
  CheckNotForked("iterating a sluice.Loader");
  NoteThreadsStarted();
  clock_.Requested(NowNs());   // starting the pipeline is asking for its first batch
  remote::ResetRemoteStats();  // the report's network figures: this pass's
  load_start_ = TakeCpuLoadSnapshot();
  epoch_ = epoch;
  next_step_ = step;
  run_ = core_->TakeAhead(epoch, step);
  if (run_ != nullptr) {
    worked_ahead_ = true;
    run_->pipeline->SetConsumerInSpan(true);
  } else {
    run_ = Unwrap(core_->StartRun(epoch, step));
  }
  const PipelineOptions& o = run_->pipeline->options();
  limit_ = core_->on_device() ? o.resources.device_ring_depth : o.resources.pool_size;
}

py::object Pass::Next(uint64_t cuda_stream) {
  CheckNotForked("the iterator of a sluice.Loader");
  if (done_) return py::none();
  if (core_->on_device() && core_->config().device_zero_copy) CheckRingNotBlocked();
  clock_.Entered(NowNs());
  auto holder = std::make_shared<LeaseHolder>();
  holder->run = run_;
  run_->zero_copy_live.fetch_add(1, std::memory_order_acq_rel);  // undone by ~LeaseHolder
  const int live_before = run_->zero_copy_live.load(std::memory_order_acquire) - 1;
  if (pending_.valid()) {
    holder->lease = std::move(pending_);  // the batch Exhausted() found
  } else if (!WaitForBatch(&holder->lease)) {
    return py::none();
  }
  WorkAhead();  // before the step's clock starts: its cost is the loader's, not the step's
  const BatchView& batch = holder->lease.view();
  NoteHandedOut(holder->lease.batch_id());
  CountDelivered(batch);
  const DLDevice where = BorrowConsumerStream(batch, cuda_stream, holder.get());
  BatchCapsules tensors = WrapBatch(holder, batch, where);
  const bool copy = MustCopy(live_before);
  const uint64_t epoch = batch.epoch, step = batch.step;
  const uint32_t size = batch.size;
  holder.reset();
  clock_.Returned(NowNs(), size);
  return py::make_tuple(tensors.images, tensors.labels, copy, epoch, step);
}

bool Pass::WaitForBatch(BatchLease* lease) {
  while (true) {
    absl::StatusOr<bool> got;
    {
      py::gil_scoped_release nogil;
      got = run_->pipeline->NextFor(lease, kSignalCheckInterval);
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
      done_ = ended_ = true;
      load_end_ = TakeCpuLoadSnapshot();
      network_end_ = CollectNetworkRead();
      core_->PassEnded();
    }
    return *got;
  }
}

bool Pass::Exhausted() {
  // In a fork() child the pipeline's threads are the parent's: nothing would come. Not ended;
  // the next start refuses the child with its message.
  if (ForkedAfterThreadsStarted()) return false;
  if (done_) return ended_;
  if (pending_.valid()) return false;
  // A wait that could never end: a real break (the caller keeps batches), not an ended pass.
  if (core_->on_device() && core_->config().device_zero_copy && RingBlockedBy()) return false;
  while (true) {
    absl::StatusOr<bool> got;
    {
      py::gil_scoped_release nogil;
      got = run_->pipeline->NextFor(&pending_, kSignalCheckInterval);
    }
    if (absl::IsDeadlineExceeded(got.status())) {
      if (PyErr_CheckSignals() != 0) {
        Cancel();
        throw py::error_already_set();
      }
      continue;
    }
    // An error (a corrupt record with on_corrupt=fail, every buffer held) lies past the last
    // batch delivered: the pass did not end; the next Next() meets it again.
    if (!got.ok()) return false;
    if (!*got) {
      done_ = ended_ = true;
      load_end_ = TakeCpuLoadSnapshot();
      network_end_ = CollectNetworkRead();
      core_->PassEnded();
    }
    return *got == false;
  }
}

uint64_t Pass::PlannedRecords(uint64_t step) const {
  const OrderSpec& o = core_->config().order;
  const uint64_t b = o.batch_size;
  const uint64_t records = core_->dataset().record_count();
  const uint64_t end = std::min(records, core_->steps_per_epoch() * b);
  const uint64_t first = step * b;
  const uint64_t global = first >= end ? 0 : std::min(end, first + b) - first;
  const DataParallelSlice& slice = core_->config().slice;
  return global / slice.world_size + (slice.rank < global % slice.world_size ? 1 : 0);
}

void Pass::CountDelivered(const BatchView& batch) {
  const DataParallelSlice& slice = core_->config().slice;
  // Steps before this one that skipping emptied (one rank: they are not delivered).
  for (uint64_t g = next_step_; g < batch.step; ++g) delivered_skipped_ += PlannedRecords(g);
  const uint64_t planned = batch.global_size / slice.world_size +
                           (slice.rank < batch.global_size % slice.world_size ? 1 : 0);
  if (planned > batch.size) delivered_skipped_ += planned - batch.size;
  delivered_samples_ += batch.size;
  next_step_ = std::max(next_step_, batch.step + 1);
}

uint64_t Pass::skipped_records() const {
  if (ended_) return run_->pipeline->Stats().skipped_records;
  return delivered_skipped_;
}

void Pass::WorkAhead() {
  if (asked_ahead_ || epoch_ >= std::numeric_limits<uint32_t>::max()) return;
  if (!run_->pipeline->built_all()) return;
  asked_ahead_ = true;
  core_->StartAhead(epoch_ + 1);
}

void Pass::NoteHandedOut(uint64_t batch_id) {
  last_id_ = batch_id;
  std::lock_guard<std::mutex> l(run_->mu);
  run_->live_ids.insert(batch_id);
}

DLDevice Pass::BorrowConsumerStream(const BatchView& batch, uint64_t cuda_stream,
                                    LeaseHolder* holder) {
  if (!batch.on_device) return DLDevice{kDLCPU, 0};
  if (core_->is_cuda()) {
#ifdef SLUICE_DEVICE_CUDA
    holder->consumer = device::BorrowCudaStream(core_->cuda_ordinal(),
                                                reinterpret_cast<cudaStream_t>(cuda_stream));
    if (batch.ready_event != nullptr) Check(holder->consumer->Wait(batch.ready_event));
    return DLDevice{kDLCUDA, core_->cuda_ordinal()};
#endif
  } else if (batch.ready_event != nullptr) {
    // The simulated device's memory is host memory: torch reads it on the CPU at once.
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = batch.ready_event->Synchronize();
    }
    Check(s);
  }
  return DLDevice{kDLCPU, 0};
}

// The kept-batch policy (docs/python.md, "Zero copy"). Host batches: zero copy while the caller
// holds fewer than half of the pinned buffers, then copies (the pipeline keeps at least half of
// its buffers). Device batches: a ring whose slot is reused `depth` batches later, so a kept
// batch cannot be worked around: zero copy (CheckRingNotBlocked) or, with
// device_zero_copy=False, a copy of every batch on the consumer's stream.
bool Pass::MustCopy(int live_before) const {
  return core_->on_device() ? !core_->config().device_zero_copy
                            : live_before >= static_cast<int>(limit_ / 2);
}

void Pass::Cancel() {
  if (ForkedAfterThreadsStarted()) return;  // the pipeline's threads are the parent's
  if (run_ && run_->pipeline) run_->pipeline->Cancel();
}

// Device batch `id` uploads into the slot of batch id - depth once that lease is released: a
// caller still holding it would wait forever. Say so instead.
std::optional<uint64_t> Pass::RingBlockedBy() const {
  if (last_id_ == UINT64_MAX) return std::nullopt;
  const uint64_t next = last_id_ + 1, depth = limit_;
  std::lock_guard<std::mutex> l(run_->mu);
  if (run_->live_ids.empty() || next < depth || *run_->live_ids.begin() > next - depth) {
    return std::nullopt;
  }
  return *run_->live_ids.begin();
}

void Pass::CheckRingNotBlocked() {
  const std::optional<uint64_t> held = RingBlockedBy();
  if (!held) return;
  const uint64_t depth = limit_;
  RaiseStatus(absl::FailedPreconditionError(
      absl::StrCat("the caller still holds device batch ", *held,
                   " of this pass, whose "
                   "slot the next batch needs (a ring of device_ring_depth=",
                   depth,
                   " slots): free batches "
                   "within ",
                   depth - 1,
                   " later ones, copy the ones you keep (x.clone()), or pass "
                   "device_zero_copy=False")));
}

py::object PassRecord::ReportJson() const {
  return JsonToPython(AnalyzeRun(run_, nullptr, cores_).ToJson());
}

BottleneckReport Pass::Report() const { return AnalyzeRun(Record(), nullptr, UsableCores()); }

RunRecord Pass::Record() const {
  CheckNotForked("the report of a sluice.Loader");
  ComputeStats compute = clock_.stats();
  compute.device = Consumer();
  compute.foreign_step = true;
  PipelineStats stats = run_->pipeline->Stats();
  // A run started ahead began before this pass: the span opens when the pass asked for its
  // first batch, and the run's work before that is outside the span (outside_span_pct).
  if (worked_ahead_) stats.start_ns = 0;
  RunRecord r = RunRecordFromStats(std::move(stats), std::move(compute));
  // The advice names sluice.Loader's arguments, from the settings this pass ran with.
  r.consumer = sluice::Consumer::kPython;
  r.h2d_format = core_->config().format.h2d_format;
  r.read_ahead_frames = core_->config().read_ahead_frames;
  r.read_concurrency = r.pipeline.read_concurrency;  // the reader's, tuned or set
  r.read_concurrency_tuned = r.pipeline.read_concurrency_tuned;
  r.network = ended_ ? network_end_ : CollectNetworkRead();  // remote datasets only
  r.batch_size = core_->config().order.batch_size;
  r.rank = static_cast<int>(core_->config().slice.rank);
  r.world_size = static_cast<int>(core_->config().slice.world_size);
  // Other processes' use of the cores from the pass's start to its end (or to now, for a pass
  // still running or left early).
  const CpuLoadSnapshot end = load_end_ ? *load_end_ : TakeCpuLoadSnapshot();
  r.other_cores_busy = OtherCoresBusy(load_start_, end);
  r.process_cores_busy = ProcessCoresBusy(load_start_, end);
  return r;
}

py::object Pass::ReportJson() const { return JsonToPython(Report().ToJson()); }

void Pass::WriteReportHtml(const std::string& path, std::vector<EpochRate> epochs) const {
  // Never over a file of the dataset this loader reads (a manifest, a shard, the lock, or
  // another name of one), as sluice-train's outputs (storage/dataset_files.h).
  Check(CheckNotADatasetFile(path, core_->dataset().manifest_path(), "report_html: path"));
  HtmlExtras extras;
  extras.title = "sluice.Loader bottleneck report";
  extras.epochs = std::move(epochs);
  extras.timeline = clock_.stats().timeline;
  const std::string page = ReportToHtml(Report(), extras);
  absl::Status written;
  {
    py::gil_scoped_release nogil;
    written = WriteFileAtomically(Env::Default(), path, page);
  }
  Check(written);
}

py::dict Pass::CorruptionStats() const {
  // The pipeline's counts alone (the report's analysis is not needed for them, and this is
  // read at every pass's end, inside the user's loop).
  const RunRecord r = Record();
  py::dict d;
  d["skipped_frames"] = r.pipeline.skipped_frames;
  d["skipped_records"] = skipped_records();
  d["samples_delivered"] = delivered_samples_;
  d["corrupt_frames"] = r.pipeline.corrupt_frames;
  return d;
}

std::string Pass::Consumer() const {
  return absl::StrCat("python consumer (batches on ", core_->config().device, ")");
}

}  // namespace sluice::python
