// The loader behind sluice.Loader (python/sluice/__init__.py): a LoaderCore holds what is
// fixed for the loader's life (options, dataset, device); each iteration is a Pass over one
// epoch (or its tail after a resume) whose next() hands batches to Python as DLPack capsules.
//
// Ownership: every batch handed out holds a lease on a pipeline buffer and a reference to its
// pass's Run, so the pipeline's memory, the device and the dataset stay alive while a tensor
// still points into them, even after the Pass and the LoaderCore are gone.
// Thread safety: LoaderCore and Pass are used by one Python thread (under the GIL); the
// leases may be released on any thread (the DLPack deleters, dlpack.h).
#ifndef SLUICE_PYTHON_SRC_LOADER_H_
#define SLUICE_PYTHON_SRC_LOADER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu_load.h"
#include "device/device.h"
#include "dlpack/dlpack.h"
#include "pipeline/pipeline.h"
#include "pipeline/pool_cache.h"
#include "pybind11/pybind11.h"
#include "report/analysis/bottleneck_report.h"
#include "report/record/run_record.h"
#include "storage/dataset.h"

namespace sluice::python {

struct LoaderConfig {
  std::string path;
  OrderSpec order;
  BatchFormat format;
  DataParallelSlice slice;
  OnCorrupt on_corrupt = OnCorrupt::kFail;
  int threads = 0;
  int decompress_threads = 0;  // 0: threads
  int preprocess_threads = 0;  // 0: threads
  uint32_t read_ahead_frames = 4;
  // Remote datasets (docs/storage.md): ranges fetched at once, and the local cache of fetched
  // frames (cache_dir "": the default cache directory; cache_bytes 0: no cache).
  uint32_t read_concurrency = 0;  // 0: tuned while reading
  std::string cache_dir;
  uint64_t cache_bytes = uint64_t{16} << 30;
  uint32_t pool_size = 0;
  uint32_t device_ring_depth = kDefaultDeviceRingDepth;
  bool device_zero_copy = true;  // device batches: zero copy (false: the caller copies each)
  std::string device = "cpu";    // cpu | sim | cuda:N
  // Start the next epoch's pipeline once this pass's is built (docs/python.md, "Work ahead").
  bool work_ahead = true;
};

struct Run;

class LoaderCore {
 public:
  // Opens the dataset and the device and validates the options (raises on error): the
  // resource bounds sluice-train applies (pipeline/resource_limits.h) and whether the batch
  // buffers fit in the memory available now.
  static std::shared_ptr<LoaderCore> Create(const LoaderConfig& c);
  ~LoaderCore();

  // The options of a pass over epoch `epoch` from step `step`.
  PipelineOptions Options(uint64_t epoch, uint64_t step) const;

  uint64_t steps_per_epoch() const;
  // The dataset's identity, as sluice-train's checkpoints record it (engine/job/resume.h):
  // the XXH3 of its manifest, as hex.
  std::string manifest_xxh3() const;
  // The transforms' canonical text (TransformSpec::identity); "" without them.
  const std::string& transforms_identity() const { return config_.format.transforms.identity(); }
  const Dataset& dataset() const { return *dataset_; }
  const LoaderConfig& config() const { return config_; }
  bool on_device() const { return device_ != nullptr; }
  bool is_cuda() const { return cuda_ordinal_ >= 0; }
  int cuda_ordinal() const { return cuda_ordinal_; }
  std::shared_ptr<device::Device> device() const { return device_; }
  std::shared_ptr<const Dataset> dataset_ptr() const { return dataset_; }

  // A run over epoch `epoch` from step `step`: its pipeline created and started (the GIL
  // released meanwhile).
  absl::StatusOr<std::shared_ptr<Run>> StartRun(uint64_t epoch, uint64_t step);
  // Work ahead (docs/python.md, "Work ahead"): starts the run of the pass over epoch `epoch`
  // from its first step, while the consumer still takes the batches of the pass before. Its
  // work in that pass's span counts as in a span (a steady loop spends each pass's span on its
  // own steps and on the next epoch's first batches); between the passes (PassEnded) it is
  // outside the span, as sluice-train's pipeline while it evaluates. Does nothing when a run is
  // already ahead, or with device batches. A run that cannot start (an error; its batch
  // buffers no longer fit in the memory available) is not kept: the pass that needs it
  // starts it again and raises then.
  void StartAhead(uint64_t epoch);
  // The run ahead for a pass over `epoch` from `step`, or null. A run ahead for another pass
  // is cancelled and dropped, except one for the epoch after `epoch` (this pass ends that
  // epoch first).
  std::shared_ptr<Run> TakeAhead(uint64_t epoch, uint64_t step);
  // The pass before the run ahead has ended: its work until its own pass starts is outside
  // the span.
  void PassEnded();
  // The epoch of the run ahead, if any (tests, docs/python.md).
  std::optional<uint64_t> ahead_epoch() const;

 private:
  explicit LoaderCore(LoaderConfig c) : config_(std::move(c)) {}
  LoaderConfig config_;
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<device::Device> device_;  // null: host batches
  // Batch and frame buffers handed from each pass's pipeline to the next (pool_cache.h).
  // Declared after device_: destroyed first, as pinned pools borrow the device.
  std::shared_ptr<PoolCache> pool_cache_ = std::make_shared<PoolCache>();
  int cuda_ordinal_ = -1;
  // The run started ahead (StartAhead) and its epoch. Declared after pool_cache_: destroyed
  // first, so its pools go back to the cache.
  uint64_t ahead_epoch_ = 0;
  std::shared_ptr<Run> ahead_;
};

// One pass of the loader, shared by the Pass and by every batch handed out.
struct Run {
  std::shared_ptr<device::Device> device;  // null: host batches
  std::shared_ptr<const Dataset> dataset;
  std::unique_ptr<Pipeline> pipeline;  // declared last: destroyed first
  std::atomic<int> zero_copy_live{0};  // batches handed out without a copy, still alive
  std::mutex mu;
  std::set<uint64_t> live_ids;  // batch ids of the leases still held
  ~Run();
};

// Owns one lease. Destroyed by the last DLPack deleter of the batch's tensors, on any thread.
struct LeaseHolder {
  std::shared_ptr<Run> run;
  BatchLease lease;
  std::unique_ptr<device::Stream> consumer;  // CUDA: the consumer's stream (borrowed)
  ~LeaseHolder();
};

// The consumer side of one pass, for the report: the Python code between next() calls is the
// compute stage. The report's span, and the HTML page's timeline, run from the pass's start
// (the iterator asked for the first batch) to the end of the last step (the consumer asked for
// the next batch).
class ConsumerClock {
 public:
  // The pass starts at `now`: the span opens.
  void Requested(int64_t now);
  // next() was entered at `now`: the time since the last batch was returned was compute.
  void Entered(int64_t now);
  // next() returns a batch of `size` samples at `now`.
  void Returned(int64_t now, uint32_t size);
  const ComputeStats& stats() const { return stats_; }

 private:
  bool batch_out_ = false;      // a batch was returned and its step has not ended
  int64_t last_return_ns_ = 0;  // when next() last returned a batch
  uint32_t last_size_ = 0;
  // The returning thread and its CPU clock then: the step's CPU time is that thread's CPU
  // time until it asks for the next batch (a step on another thread counts its wall time).
  std::thread::id return_thread_;
  int64_t return_thread_cpu_ns_ = 0;
  ComputeStats stats_;
};

// What one finished pass measured (Pass::Record), kept by the Loader after the pass and its
// pipeline are gone: the report of each of its recent passes, which it sets beside the latest
// one's (docs/bottleneck.md, "Short passes").
class PassRecord {
 public:
  PassRecord(RunRecord run, int cores) : run_(std::move(run)), cores_(cores) {}
  pybind11::object ReportJson() const;

 private:
  RunRecord run_;
  int cores_ = 1;
};

// One pass over an epoch (or its tail). Iterated by the Python Loader; next() releases the GIL
// while it waits, in slices of 50 ms, checking for signals (Ctrl-C) between slices.
class Pass {
 public:
  Pass(std::shared_ptr<LoaderCore> core, uint64_t epoch, uint64_t step);
  ~Pass() { Cancel(); }

  // None at the end of the pass; else (images capsule, labels capsule, copy, epoch, step).
  // `copy`: the caller must copy the images and drop the capsule's tensor (the kept-batch
  // policy: more than half of the pipeline's buffers are held by the caller already).
  // `cuda_stream`: the consumer's current cudaStream_t (CUDA loaders; 0 = legacy default).
  pybind11::object Next(uint64_t cuda_stream);
  void Cancel();

  // What this pass measured so far, as the report reads it (the Python consumer as the
  // compute stage): a copy, which outlives the pass and its pipeline.
  RunRecord Record() const;
  // The report of this pass so far: AnalyzeRun of Record() on the usable cores.
  BottleneckReport Report() const;
  pybind11::object ReportJson() const;
  // The report as one HTML page at `path` (report/render/html.h), with `epochs`
  // (the loader's finished passes) and this pass's timeline. Raises on I/O errors.
  void WriteReportHtml(const std::string& path, std::vector<EpochRate> epochs) const;
  // The corruption counts of sluice.Loader.skipped(): skipped_frames and corrupt_frames as the
  // pipeline met them (it works ahead: after a break, some may lie past the last batch
  // delivered), skipped_records and samples_delivered as counted below.
  pybind11::dict CorruptionStats() const;

  // Whether the pass has no batch left to deliver (docs/python.md, "Epochs"): waits, the GIL
  // released, until its next batch is ready (kept for Next(): false) or it ends with none
  // (true). false too, without waiting for ever, when the pipeline failed or the next batch
  // could never come (the caller holds every host buffer, or the device batch whose ring slot
  // it needs). Ctrl-C while it waits cancels the pass and raises KeyboardInterrupt.
  bool Exhausted();
  // Records skipped as corrupt (on_corrupt=skip) in the steps this pass delivered: in each
  // delivered batch, this rank's share of the step's planned records less the batch's size,
  // plus the whole of the steps before it that skipping emptied (not delivered). Once the pass
  // has ended, every record it skipped (its trailing emptied steps too).
  uint64_t skipped_records() const;
  uint64_t delivered_samples() const { return delivered_samples_; }

  int zero_copy_live() const { return run_->zero_copy_live.load(); }
  uint32_t limit() const { return limit_; }

 private:
  void CheckRingNotBlocked();
  // The batch id of the oldest batch the caller still holds whose ring slot the next device
  // batch needs, or nullopt (CheckRingNotBlocked).
  std::optional<uint64_t> RingBlockedBy() const;
  // This rank's share of global step `step`'s planned records (before skips).
  uint64_t PlannedRecords(uint64_t step) const;
  // Counts the batch handed out now (skipped_records, delivered_samples).
  void CountDelivered(const BatchView& batch);
  // Waits for the next batch into `*lease` in slices, checking for Ctrl-C between them.
  // false: the pass is over.
  bool WaitForBatch(BatchLease* lease);
  void NoteHandedOut(uint64_t batch_id);
  // Makes the batch readable by the consumer; returns where its memory is.
  DLDevice BorrowConsumerStream(const BatchView& batch, uint64_t cuda_stream, LeaseHolder* holder);
  bool MustCopy(int live_before) const;
  // Starts the next epoch's run once this one is built (LoaderCore::StartAhead), once.
  void WorkAhead();
  std::string Consumer() const;

  std::shared_ptr<LoaderCore> core_;
  uint64_t epoch_ = 0;         // the epoch this pass delivers
  bool asked_ahead_ = false;   // WorkAhead has asked for the next epoch's run
  bool worked_ahead_ = false;  // this pass's run was started ahead (LoaderCore::TakeAhead)
  std::shared_ptr<Run> run_;
  // The batch Exhausted() found ready, handed out by the next Next(). Declared after run_:
  // released before the run goes.
  BatchLease pending_;
  bool ended_ = false;              // the pipeline ended with no batch left (not an error)
  uint64_t next_step_ = 0;          // the step after the last one counted (CountDelivered)
  uint64_t delivered_samples_ = 0;  // samples handed out
  uint64_t delivered_skipped_ = 0;  // records skipped in the steps counted
  uint32_t limit_ = 0;
  uint64_t last_id_ = UINT64_MAX;  // the batch id last handed out
  bool done_ = false;
  // The machine's CPU counters when the pass started and when it ended (common/cpu_load.h): the
  // report's other processes' use of the cores.
  CpuLoadSnapshot load_start_;
  std::optional<CpuLoadSnapshot> load_end_;
  // The network figures when the pass ended: a report asked for later does not count what the
  // next pass's work-ahead fetched after this pass ended.
  std::optional<NetworkRead> network_end_;
  ConsumerClock clock_;
};

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_LOADER_H_
