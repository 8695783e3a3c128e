// TrainJob: one whole sluice-train run as a library call, so the tool stays a thin main and
// tests and what-if runs can run jobs in-process.
//
//   dataset (shards, or IDX files sharded into a cache) -> Pipeline (placement from the
//   backend) -> PipelineBatchSource -> Trainer(backend) -> checkpoints / safetensors / metrics,
//   and the RunRecord the diagnostics read (report/record/run_record.h).
//
// Ownership: RunTrainJob borrows `env` for the call; everything it creates (datasets, backend,
// pipelines) is gone when it returns. The result is a plain value.
// Errors: kNotFound / kDataLoss for missing or corrupt data (naming the file), kInvalidArgument
// for bad options (also --drop-last with a batch larger than the dataset, --test-data without a
// test split, an output path that cannot be written: checked before the first step),
// kFailedPrecondition for a resume that would not continue the same run (every differing field
// of the run identity, old and new, in one message; a dangling checkpoint symlink; a checkpoint
// already at the last epoch) and for an epoch that trains no sample, kDataLoss when more than
// max_corrupt_fraction of the records read were skipped as corrupt, kOutOfRange when training
// diverges (a non-finite loss or weight; nothing is written after it), kUnavailable when CUDA
// is asked for but absent, kResourceExhausted for out-of-memory (device or pinned host memory),
// kInternal for a failed device call (naming it), and the Env's I/O errors for checkpoints,
// metrics and the export. A failed run leaves no partial checkpoint (checkpoints are written
// atomically).
// Thread safety: callbacks run on the calling thread. Two jobs may run at once on different
// threads, with one limit: process-wide settings are shared. The pipeline raises TBB's worker
// limit with a tbb::global_control while it lives, and the CPU backend sets OpenBLAS's thread
// count for the whole process (openblas_set_num_threads), so concurrent jobs with different
// --threads see the last setting. Run jobs one at a time when their thread counts differ.
#ifndef SLUICE_ENGINE_JOB_TRAIN_JOB_H_
#define SLUICE_ENGINE_JOB_TRAIN_JOB_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/backend_factory.h"
#include "engine/diagnostics/ceilings.h"
#include "engine/memory.h"
#include "engine/trainer.h"
#include "pipeline/pipeline.h"
#include "report/record/run_record.h"
#include "storage/dataset.h"

namespace sluice {

struct TrainJobResult;

struct TrainJobOptions {
  std::string data;       // --data
  std::string test_data;  // --test-data; empty: the "test" sibling split if any
  bool evaluate = true;   // evaluate on the test split after each epoch
  std::string cache_dir;  // for IDX input; empty: DefaultCacheDir()
  ModelConfig model;
  OptimizerConfig optimizer;
  // The device (--device) and each platform's settings. The job sets backend.options'
  // max_batch (each rank's share of the batch), gradient_comm
  // (data-parallel runs) and, in a data-parallel run whose device names no ordinal, the
  // device's ordinal (the rank's local rank); cpu.threads 0 becomes ComputeThreadsFor.
  BackendSpec backend;
  uint64_t epochs = 10;
  // Order, batch format, corruption policy, resources and diagnostics of the train pipeline.
  // Its span and placement are set by the job: the span from the epochs and the resume
  // position, the placement from the backend (a CPU backend never gets uploaded batches).
  // pipeline.order.seed is the run's seed: the shuffle's and the model initialization's.
  PipelineOptions pipeline;
  // The chain the test split goes through (--eval-transforms); nullopt: EvalTransforms of
  // pipeline.format.transforms (pipeline/transforms/transform_spec.h), said in a notice at start
  // when it differs from the training chain.
  std::optional<TransformSpec> eval_transforms;
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // optimizer steps between checkpoints (0: end only)
  std::string resume;            // a checkpoint file, or "auto": checkpoint_dir's, if present
  std::string export_safetensors;
  std::string metrics_out;  // JSON lines, one per epoch
  // With pipeline.on_corrupt = kSkip: the run fails once more than this fraction of the records
  // read (in the train split, or in the test split's evaluations) were skipped as corrupt.
  double max_corrupt_fraction = 0.01;
  int64_t stop_after_steps = -1;  // for tests: stop as if killed after N steps
  // Polled between steps: when set, the run stops after the current step, with a checkpoint
  // (TrainerOptions::stop_requested); sluice-train sets it from SIGINT/SIGTERM. Null: never.
  const std::atomic<bool>* stop_requested = nullptr;
  // Diagnostics: skip compute entirely (what-if compute), or busy-wait this long
  // in each step on top of it (inject-delay compute).
  bool compute_free = false;
  int64_t inject_compute_delay_us = 0;
  KeyValues run_config;  // recorded in checkpoints and the report
  // --autotune: after the first epoch of this run, adjust the pipeline (engine/job/autotune.h)
  // within these budgets; on_autotune receives the decisions, one line each.
  bool autotune = false;
  uint64_t autotune_memory_bytes = 256 << 20;
  std::function<void(const std::vector<std::string>&)> on_autotune;
  // Called before training with a line the user should read at start, e.g. that nothing will
  // be evaluated because the test split is the split trained on (sluice-train prints it on
  // stderr). May be empty.
  std::function<void(const std::string&)> on_notice;
  int64_t progress_every_steps = 200;
  // Called every `report_every_steps` optimizer steps (0: never) with the statistics so far
  // (train totals are not filled in yet), for --report-every.
  int64_t report_every_steps = 0;
  std::function<void(const RunRecord&)> on_report;
  std::function<void(const TrainProgress&)> on_progress;
  std::function<void(const EpochSummary&)> on_epoch_end;
  // Data-parallel runs (docs/distributed.md): the job's world (borrowed; null or a world of
  // one: a single process). Every rank runs RunTrainJob with the same options; the batch size
  // is the global batch, each rank trains its slice of it, and rank 0 alone writes the
  // checkpoints, the metrics and the export. Ranks whose settings or dataset differ are refused
  // at start (kFailedPrecondition naming each difference).
  dist::Communicator* comm = nullptr;
  // --record-order: writes, for every trained step, "epoch step id id ..." (the split-wide
  // record ids of this rank's samples, in batch order) to this file; in a data-parallel run
  // each rank writes <path>.rank<R>. For auditing the order (and tests). Empty: off.
  std::string record_order_path;
};

struct TrainJobResult {
  TrainResult train;
  RunRecord run;  // what the diagnostics read (report, trace)
  uint64_t train_records = 0;
  uint64_t test_records = 0;
  std::string train_manifest;
  std::string test_manifest;  // empty when not evaluated
  std::string not_evaluated;  // why nothing was evaluated (empty: it was)
  bool resumed = false;
  uint64_t resumed_epoch = 0;
  uint64_t resumed_step = 0;
  uint64_t resumed_samples = 0;       // samples trained in the run before this process
  std::string checkpoint_path;        // written, when checkpoints are on
  std::vector<std::string> autotune;  // --autotune's decisions, when it ran
  int max_batch = 0;                  // this rank's largest batch (the backend's max_batch)
};

absl::StatusOr<TrainJobResult> RunTrainJob(Env* env, const TrainJobOptions& options);

// The CPU backend's compute threads when --compute-threads is 0: the cores the pipeline does
// not need. The pipeline's CPU work per sample is about a third of the reference MLP's step
// (u8 batches: ~1.2 us vs ~3.3 us on one core, docs/benchmarks.md), so it needs about a quarter
// of the cores; that share, rounded down and at most its own thread count, is left to it:
// compute = max(1, cores - min(floor(cores / 4), pipeline_threads)). On 2 cores that is 2: the
// pipeline's ~0.3 core shares them, and 2 compute threads measured faster than 1.
// `pipeline_threads` 0 means cores.
int DefaultComputeThreads(int cores, int pipeline_threads);
// options.backend.cpu.threads, or DefaultComputeThreads(UsableCores(), the pipeline's threads).
int ComputeThreadsFor(const TrainJobOptions& options);

// The ceilings that a job with these options is compared against: its batch size, batch
// format, backend (device, platform settings, compute threads), model, optimizer and cache
// directory.
CeilingOptions CeilingOptionsFor(const TrainJobOptions& options);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_TRAIN_JOB_H_
