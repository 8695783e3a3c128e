#include "engine/job/train_job.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cpu_load.h"
#include "common/file_lock.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "engine/backend_factory.h"
#include "engine/job/autotune.h"
#include "engine/job/corruption_budget.h"
#include "engine/job/datasets.h"
#include "engine/job/measured_backend.h"
#include "engine/job/outputs.h"
#include "engine/job/pipeline_batch_source.h"
#include "engine/job/ranks.h"
#include "engine/job/resume.h"
#include "engine/job/run_limits.h"
#include "pipeline/batch_format.h"
#include "report/stages.h"
#include "storage/remote/remote_env.h"

namespace sluice {
namespace {

// The train pipeline's options. Placement follows from the backend that reads the batches:
// the CPU backend gets host batches, a device backend batches uploaded to its device.
PipelineOptions TrainPipelineOptions(const TrainJobOptions& options, const Backend& backend) {
  PipelineOptions p = options.pipeline;
  p.placement.device = backend.device();
  p.slice = SliceOf(options);
  // A stage made free by a what-if run skips its injected delay too: the delay is part of the
  // stage's work, and the what-if table must show what removing that work buys.
  // (Transforms: the chain's cost only; an injected delay is not the chain's.)
  const std::optional<Stage> free = p.diagnostics.what_if;
  if (free && static_cast<int>(*free) < kNumPipelineStages) {
    p.diagnostics.inject_delay_us[static_cast<int>(*free)] = 0;
  }
  return p;
}

// "decode 2000 us per image, compute 500 us per step": the delays the run injected, in the
// report's flow order ("" when none); each stage's item is its row's unit (report/stages.h).
std::string InjectedDelays(const TrainJobOptions& o,
                           std::vector<std::pair<Stage, int64_t>>* delays) {
  std::string out;
  for (const StageInfo& info : kReportStageTable) {
    if (!info.inject_delay) continue;
    const int64_t us = info.stage == Stage::kCompute
                           ? (o.compute_free ? 0 : o.inject_compute_delay_us)
                           : o.pipeline.diagnostics.inject_delay_us[static_cast<int>(info.stage)];
    if (us <= 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", info.name, " ", us, " us per ", info.unit);
    delays->emplace_back(info.stage, us);
  }
  return out;
}

// Evaluation reads the test split in file order, with no diagnostics.
PipelineOptions TestPipelineOptions(const TrainJobOptions& options, const Backend& backend,
                                    const TransformSpec& eval_transforms) {
  PipelineOptions p = options.pipeline;
  p.format.transforms = eval_transforms;
  p.order.shuffle = false;
  p.order.drop_last = false;
  p.placement.device = backend.device();
  p.slice = SliceOf(options);
  p.diagnostics = PipelineDiagnostics{};
  return p;
}

TrainerOptions MakeTrainerOptions(Env* env, const TrainJobOptions& options,
                                  uint64_t train_records) {
  TrainerOptions t;
  t.epochs = options.epochs;
  t.optimizer = options.optimizer;
  if (options.optimizer.schedule == LrSchedule::kCosine && options.optimizer.total_steps == 0) {
    const uint64_t per_epoch = StepsPerEpoch(train_records, options.pipeline.order);
    t.optimizer.total_steps = static_cast<int64_t>(per_epoch * options.epochs);
  }
  t.progress_every_steps = options.progress_every_steps;
  t.seed = options.pipeline.order.seed;
  t.env = env;
  t.run_config = options.run_config;
  t.stop_after_steps = options.stop_after_steps;
  t.stop_requested = options.stop_requested;
  t.on_progress = options.on_progress;
  return t;
}

// What the diagnostics read, from the pipeline's and the backend's statistics so far.
RunRecord RecordRun(const PipelineBatchSource& source, MeasuredBackend& backend) {
  RunRecord r = RunRecordFromStats(
      source.pipeline() != nullptr ? source.pipeline()->Stats() : PipelineStats{}, backend.stats());
  r.memory = backend.memory();
  r.network = CollectNetworkRead();    // remote datasets only
  if (source.pipeline() != nullptr) {  // the settings the report's advice starts from
    const PipelineOptions& o = source.pipeline()->options();
    r.h2d_format = o.format.h2d_format;
    r.read_ahead_frames = o.resources.read_ahead_frames;
    r.read_concurrency = r.pipeline.read_concurrency;  // the reader's, tuned or set
    r.read_concurrency_tuned = r.pipeline.read_concurrency_tuned;
    r.batch_size = o.order.batch_size;
  }
  return r;
}

// --report-every: intermediate reports ride on the progress callback (it runs on the training
// thread between steps, so reading the statistics there is safe).
void AddIntermediateReports(const TrainJobOptions& options, const PipelineBatchSource& source,
                            MeasuredBackend& backend, TrainerOptions* t) {
  if (options.report_every_steps <= 0 || !options.on_report) return;
  t->progress_every_steps = std::gcd(
      options.progress_every_steps > 0 ? options.progress_every_steps : options.report_every_steps,
      options.report_every_steps);
  t->on_progress = [&options, &source, &backend,
                    next_report = options.report_every_steps](const TrainProgress& p) mutable {
    if (options.on_progress && options.progress_every_steps > 0 &&
        p.optimizer_steps % options.progress_every_steps == 0) {
      options.on_progress(p);
    }
    if (p.optimizer_steps < next_report) return;
    next_report += options.report_every_steps;
    options.on_report(RecordRun(source, backend));
  };
}

// --autotune: after the first epoch of this run, new resources for the train pipeline.
std::vector<std::string> AutotuneAfterEpoch(const TrainJobOptions& options,
                                            PipelineBatchSource& source, MeasuredBackend& backend,
                                            double epoch_seconds, uint64_t features) {
  const PipelineStats stats = source.pipeline()->Stats();
  const PipelineOptions& current = source.pipeline()->options();
  AutotuneBudget budget;
  budget.cpu_threads = UsableCores();
  budget.memory_bytes = options.autotune_memory_bytes;
  budget.device_memory_bytes = options.autotune_memory_bytes;
  const uint64_t batch_bytes = uint64_t{current.order.batch_size} *
                               (features * H2DFormatSize(current.format.h2d_format) + 4);
  AutotuneDecision decision =
      Autotune(current.resources, stats, backend.stats(), epoch_seconds, budget, batch_bytes);
  if (decision.changed) source.Retune(decision.resources);
  return decision.reasons;
}

// The host table (engine/memory.h). The backend's tagged memory is host memory on the CPU
// backend and on the simulated device (whose device memory is host memory), not on a GPU.
HostMemoryReport HostMemoryAfterRun(int64_t baseline_rss, const RunRecord& run,
                                    const PipelineStats& test_peak, const device::Device* device) {
  HostMemoryReport host;
  host.baseline_rss = baseline_rss;
  auto line = [&host](std::string name, uint64_t bytes) {
    host.lines.push_back({std::move(name), static_cast<int64_t>(bytes)});
  };
  line("train: pinned batch pool", run.pipeline.pool_bytes);
  line("train: decoded-frame buffers", run.pipeline.frame_buffer_bytes);
  line("train: stored-frame buffers", run.pipeline.stored_buffer_bytes);
  line("test: pinned batch pool", test_peak.pool_bytes);
  line("test: decoded-frame buffers", test_peak.frame_buffer_bytes);
  line("test: stored-frame buffers", test_peak.stored_buffer_bytes);
  if (device == nullptr || device->platform() == device::Platform::kSim) {
    line("backend (all tags above)", static_cast<uint64_t>(run.memory.total_peak));
  }
  host.peak_rss = ReadProcessMemory().peak_rss_bytes;
  return host;
}

// One run of RunTrainJob: the parts it opens, in the order it needs them. Each method is one
// step of the job; Run() is the wiring.
class TrainJob {
 public:
  TrainJob(Env* env, const TrainJobOptions& options) : env_(env), o_(options) {}

  absl::StatusOr<TrainJobResult> Run();

 private:
  absl::Status OpenData();
  absl::Status ChooseEvalTransforms();
  absl::Status CheckOutputs();
  absl::StatusOr<std::unique_ptr<Backend>> CreateJobBackend(const ModelState& initial);
  TrainerOptions TrainerOptionsFor(PipelineBatchSource& train_source, MeasuredBackend& backend,
                                   PipelineBatchSource* test_source);
  void OnEpochEnd(const EpochSummary& s, PipelineBatchSource& train_source,
                  MeasuredBackend& backend, PipelineBatchSource* test_source);
  absl::Status CheckCorruption(const PipelineBatchSource& train_source) const;
  // Values of one batch sample: the transforms' output (checked by OpenData).
  uint64_t BatchSampleValues() const;
  absl::Status FinishRecord(PipelineBatchSource& train_source, MeasuredBackend& backend);

  Env* env_;
  const TrainJobOptions& o_;
  TrainJobResult result_;
  int64_t baseline_rss_ = 0;
  Splits splits_;
  TransformSpec eval_transforms_;  // the test split's chain (ChooseEvalTransforms)
  KeyValues identity_;
  std::optional<Checkpoint> checkpoint_;
  std::unique_ptr<dist::Communicator> gradient_comm_;
  std::optional<CorruptionBudget> budget_;
  std::optional<MetricsLog> metrics_;
  absl::Status metrics_status_;
  bool autotuned_ = false;
  std::atomic<bool> stop_agreed_{false};  // TrainerOptions::stop_agreed
};

// The splits, their figures in the result, and the checks that need them (before anything
// is allocated).
absl::Status TrainJob::OpenData() {
  SplitSources sources{o_.data, o_.test_data, o_.evaluate, o_.cache_dir};
  ASSIGN_OR_RETURN(splits_, OpenSplits(env_, sources, o_.model, o_.pipeline.format));
  if (absl::Status s =
          CheckNormalization(o_.pipeline.format.normalization, splits_.train->spec().channels);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--normalize-mean/--normalize-std: ", s.message(), " (",
                     splits_.train->manifest_path(), ")"));
  }
  result_.train_records = splits_.train->record_count();
  result_.train_manifest = splits_.train->manifest_path();
  if (splits_.test != nullptr) {
    result_.test_records = splits_.test->record_count();
    result_.test_manifest = splits_.test->manifest_path();
  }
  RETURN_IF_ERROR(CheckRunFits(o_, *splits_.train));
  if (o_.pipeline.order.drop_last && o_.pipeline.order.batch_size > result_.train_records) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drop-last with --batch-size ", o_.pipeline.order.batch_size,
                     " larger than the ", result_.train_records, " records of ",
                     result_.train_manifest, ": no batch would be trained"));
  }
  // An image folder's records are stored class by class (torchvision's order): unshuffled,
  // every batch holds one class and the model learns the last classes it saw.
  if (!o_.pipeline.order.shuffle && !splits_.train->manifest().class_names.empty() &&
      o_.on_notice) {
    o_.on_notice(absl::StrCat(
        result_.train_manifest,
        " was sharded from an image folder, whose records are stored class by class, and "
        "--shuffle is off: each batch holds one or two classes; add --shuffle"));
  }
  if (!o_.evaluate) {
    result_.not_evaluated = "evaluation is off (--evaluate=false)";
  } else if (!splits_.not_evaluated.empty()) {
    result_.not_evaluated = splits_.not_evaluated;
    // Said now, not only in the summary: a run of many epochs prints no test figure at all.
    if (o_.on_notice)
      o_.on_notice(absl::StrCat("nothing will be evaluated: ", result_.not_evaluated));
  } else if (splits_.test == nullptr) {
    result_.not_evaluated = absl::StrCat("no test split beside ", result_.train_manifest,
                                         " (give one with --test-data)");
  }
  if (splits_.test != nullptr) RETURN_IF_ERROR(ChooseEvalTransforms());
  return absl::OkStatus();
}

// The test split's chain: --eval-transforms, or the training chain with its random ops made
// deterministic (said at start when that changes it). Its samples must be the model's input:
// the shape and type the training chain gives.
absl::Status TrainJob::ChooseEvalTransforms() {
  const BatchFormat& train_format = o_.pipeline.format;
  if (o_.eval_transforms.has_value()) {
    eval_transforms_ = *o_.eval_transforms;
  } else {
    ASSIGN_OR_RETURN(eval_transforms_, EvalTransforms(train_format.transforms));
    if (eval_transforms_.identity() != train_format.transforms.identity() && o_.on_notice) {
      o_.on_notice(absl::StrCat(
          "--transforms is random; the test split is evaluated through '",
          eval_transforms_.empty() ? "no transforms" : eval_transforms_.identity(),
          "', its deterministic form (docs/transforms.md, \"Evaluation\"; --eval-transforms "
          "sets another)"));
    }
  }
  BatchFormat eval_format = train_format;
  eval_format.transforms = eval_transforms_;
  ASSIGN_OR_RETURN(const ResolvedBatchFormat train,
                   ResolveBatchFormat(splits_.train->spec(), train_format, SettingNames::kFlags,
                                      splits_.train->manifest().image_bound));
  absl::StatusOr<ResolvedBatchFormat> eval =
      ResolveBatchFormat(splits_.test->spec(), eval_format, SettingNames::kFlags,
                         splits_.test->manifest().image_bound);
  const std::string what = o_.eval_transforms.has_value()
                               ? std::string("--eval-transforms")
                               : absl::StrCat("the evaluation chain '", eval_transforms_.identity(),
                                              "' (from --transforms)");
  if (!eval.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " on ", splits_.test->manifest_path(), ": ", eval.status().message()));
  }
  // The chains' outputs too, not only the batches': a u8 chain and one ending in Normalize both
  // make f32 batches, one of x/255 and the other normalized.
  auto chain_output = [](const ResolvedBatchFormat& f, const RecordSpec& stored) {
    if (f.chain != nullptr) return f.chain->output_spec();
    SampleSpec s = StoredSampleSpec(stored);
    s.layout = SampleLayout::kCHW;
    return s;
  };
  const SampleSpec eval_out = chain_output(*eval, splits_.test->spec());
  const SampleSpec train_out = chain_output(train, splits_.train->spec());
  if (!(eval->sample == train.sample) || !(eval_out == train_out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the test samples after it are ", SampleSpecString(eval_out),
        ", but the model trains on ", SampleSpecString(train_out),
        " (after --transforms); give --eval-transforms that makes the same (the same size, and "
        "ending as --transforms ends: a Normalize or ToDtype)"));
  }
  return absl::OkStatus();
}

// Outputs are checked before the first step: a run must not train and then lose its result.
absl::Status TrainJob::CheckOutputs() {
  RETURN_IF_ERROR(ProbeJobOutputs(env_, o_));
  if (!(o_.max_corrupt_fraction >= 0 && o_.max_corrupt_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-corrupt-fraction: must be in [0, 1], got ", o_.max_corrupt_fraction));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> TrainJob::CreateJobBackend(const ModelState& initial) {
  BackendSpec spec = o_.backend;
  // Each rank trains its slice of the global batch: at most ceil(B / ranks) samples.
  const uint32_t world = SliceOf(o_).world_size;
  spec.options.max_batch = static_cast<int>((o_.pipeline.order.batch_size + world - 1) / world);
  result_.max_batch = spec.options.max_batch;
  if (IsDistributed(o_) || spec.options.exchange_in_world_of_one) {
    // The exchange runs where the steps run (the sim device's compute stream): a communicator
    // of its own, so it never interleaves with this thread's collectives.
    if (o_.comm != nullptr) {
      ASSIGN_OR_RETURN(gradient_comm_, o_.comm->Duplicate());
    } else {
      gradient_comm_ = dist::SingleProcessCommunicator();
    }
    spec.options.gradient_comm = gradient_comm_.get();
  }
  // Each rank on a machine takes its own device: cuda / sim / auto mean "device <local rank>".
  if (IsDistributed(o_) && !spec.device.has_ordinal()) {
    spec.device.ordinal = o_.comm->local_rank();
  }
  spec.cpu.threads = ComputeThreadsFor(o_);
  // A stop ends a simulated run within a step's real work, not the modelled time of every step
  // already enqueued (the results stay those of the steps that ran).
  spec.sim.device.skip_modelled_time = o_.stop_requested;
  // And on every rank once the ranks agree to stop (the signal reached only one of them).
  spec.sim.device.skip_modelled_time_too = &stop_agreed_;
  try {
    return CreateBackend(spec, initial, o_.optimizer);
  } catch (const std::bad_alloc&) {  // the backend's buffers (engine/cpu/internal/host_buffer.h)
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory while allocating the model's buffers (--layers ",
                     absl::StrJoin(o_.model.layers, ","), ")"));
  }
}

TrainerOptions TrainJob::TrainerOptionsFor(PipelineBatchSource& train_source,
                                           MeasuredBackend& backend,
                                           PipelineBatchSource* test_source) {
  TrainerOptions t = MakeTrainerOptions(env_, o_, result_.train_records);
  t.identity = identity_;
  AddIntermediateReports(o_, train_source, backend, &t);
  t.check = [this, &train_source] { return CheckCorruption(train_source); };
  t.comm = o_.comm;
  t.stop_agreed = &stop_agreed_;
  if (!o_.checkpoint_dir.empty()) {
    result_.checkpoint_path = CheckpointPath(o_.checkpoint_dir);
    t.checkpoint_path = result_.checkpoint_path;
    t.checkpoint_every_steps = o_.checkpoint_every;
  }
  t.on_epoch_end = [this, &train_source, &backend, test_source](const EpochSummary& s) {
    OnEpochEnd(s, train_source, backend, test_source);
  };
  return t;
}

void TrainJob::OnEpochEnd(const EpochSummary& s, PipelineBatchSource& train_source,
                          MeasuredBackend& backend, PipelineBatchSource* test_source) {
  if (test_source != nullptr && test_source->pipeline() != nullptr) {
    budget_->AddEvaluation(test_source->pipeline()->Stats());
  }
  if (metrics_ && metrics_status_.ok()) metrics_status_ = metrics_->Append(s);
  if (o_.autotune && !autotuned_ && train_source.pipeline() != nullptr) {
    autotuned_ = true;
    result_.autotune =
        AutotuneAfterEpoch(o_, train_source, backend, s.seconds, BatchSampleValues());
    if (o_.on_autotune) o_.on_autotune(result_.autotune);
  }
  if (o_.on_epoch_end) o_.on_epoch_end(s);
}

uint64_t TrainJob::BatchSampleValues() const {
  auto format = ResolveBatchFormat(splits_.train->spec(), o_.pipeline.format, SettingNames::kFlags);
  return format.ok() ? format->sample.values() : splits_.train->spec().sample_values();
}

absl::Status TrainJob::CheckCorruption(const PipelineBatchSource& train_source) const {
  if (train_source.pipeline() == nullptr) return budget_->Check(nullptr);
  const PipelineStats stats = train_source.pipeline()->Stats();
  return budget_->Check(&stats);
}

// What the diagnostics read, once training is over.
absl::Status TrainJob::FinishRecord(PipelineBatchSource& train_source, MeasuredBackend& backend) {
  result_.run = RecordRun(train_source, backend);
  result_.run.test_skipped_frames = budget_->test_skipped_frames();
  result_.run.test_skipped_records = budget_->test_skipped_records();
  result_.run.test_corrupt_frames = budget_->test_corrupt_frames();
  result_.run.not_evaluated = result_.not_evaluated;
  result_.run.injected_delays = InjectedDelays(o_, &result_.run.injected_delay_us);
  result_.run.samples = static_cast<uint64_t>(result_.train.samples);
  result_.run.train_seconds = result_.train.train_seconds;
  if (train_source.pipeline() != nullptr) result_.run.trace = train_source.pipeline()->Trace();
  result_.run.compute_spans = backend.TakeSpans();
  result_.run.exchange = backend.exchange();
  for (const EpochSummary& e : result_.train.epochs) {
    result_.run.epochs.push_back(
        {e.epoch, static_cast<uint64_t>(e.train_samples), e.seconds, e.samples_per_second});
  }
  if (o_.comm != nullptr) {
    result_.run.rank = o_.comm->rank();
    result_.run.world_size = o_.comm->size();
  }
  result_.run.memory_formula = ComputeMemoryFormula(o_.model, o_.optimizer, result_.max_batch);
  result_.run.host_memory =
      HostMemoryAfterRun(baseline_rss_, result_.run, budget_->test_peak(), backend.device());
  return absl::OkStatus();
}

absl::StatusOr<TrainJobResult> TrainJob::Run() {
  if (o_.data.empty()) return absl::InvalidArgumentError("--data: a dataset is required");
  if (o_.epochs < 1) return absl::InvalidArgumentError("--epochs: must be at least 1");
  // One job per checkpoint directory, for the job's whole life, taken before --resume=auto
  // looks for a checkpoint there (docs/formats/lock.md). Creates the directory.
  std::unique_ptr<FileLock> checkpoint_lock;
  if (!o_.checkpoint_dir.empty() && IsRankZero(o_)) {
    ASSIGN_OR_RETURN(checkpoint_lock,
                     FileLock::Acquire(env_, o_.checkpoint_dir, "sluice-train checkpoints"));
  }
  // Resident memory before any dataset, pipeline or backend exists: the host table's baseline.
  baseline_rss_ = ReadProcessMemory().rss_bytes;
  RETURN_IF_ERROR(OpenData());
  RETURN_IF_ERROR(CheckOutputs());
  // Model state: fresh, or from the checkpoint being resumed (which must be of the same run).
  identity_ = RunIdentity(o_, *splits_.train);
  RETURN_IF_ERROR(CheckRanksAgree(o_, identity_, splits_.test.get()));
  ASSIGN_OR_RETURN(checkpoint_, LoadResumeCheckpoint(env_, o_, identity_));
  const ModelState initial = checkpoint_
                                 ? checkpoint_->state
                                 : InitModelState(o_.model, o_.optimizer, o_.pipeline.order.seed);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> device, CreateJobBackend(initial));
  MeasuredBackend backend(device.get(), o_.compute_free,
                          o_.compute_free ? 0 : o_.inject_compute_delay_us,
                          o_.pipeline.diagnostics.trace_capacity > 0);

  auto compute_stream = [&backend] { return backend.compute_stream(); };
  PipelineBatchSource train_source(splits_.train.get(), TrainPipelineOptions(o_, backend),
                                   o_.epochs, compute_stream);
  std::unique_ptr<PipelineBatchSource> test_source;
  if (splits_.test != nullptr) {
    test_source = std::make_unique<PipelineBatchSource>(
        splits_.test.get(), TestPipelineOptions(o_, backend, eval_transforms_), 1, compute_stream);
  }
  budget_.emplace(o_.max_corrupt_fraction, result_.train_manifest, result_.test_manifest, o_.comm);
  if (!o_.metrics_out.empty() && IsRankZero(o_)) {
    ASSIGN_OR_RETURN(
        metrics_, MetricsLog::Open(env_, o_.metrics_out,
                                   /*keep_existing=*/checkpoint_.has_value(), o_.stop_requested));
  }
  std::optional<RecordingBatchSource> recording;
  if (!o_.record_order_path.empty()) recording.emplace(&train_source);
  Trainer trainer(&backend, recording ? static_cast<BatchSource*>(&*recording) : &train_source,
                  test_source.get(), TrainerOptionsFor(train_source, backend, test_source.get()));
  if (checkpoint_) {
    RETURN_IF_ERROR(trainer.Resume(*checkpoint_));
    result_.resumed = true;
    result_.resumed_epoch = checkpoint_->epoch;
    result_.resumed_step = checkpoint_->step_in_epoch;
    result_.resumed_samples = checkpoint_->samples_total;
  }
  // Other processes' use of the cores while this trains (the resource model counts the rest).
  const CpuLoadSnapshot load_before = TakeCpuLoadSnapshot();
  remote::ResetRemoteStats();  // the report's network figures: from here (storage/remote)
  ASSIGN_OR_RETURN(result_.train, trainer.Run());
  const CpuLoadSnapshot load_after = TakeCpuLoadSnapshot();
  const std::optional<double> other_cores_busy = OtherCoresBusy(load_before, load_after);
  RETURN_IF_ERROR(metrics_status_);
  if (recording) {
    RETURN_IF_ERROR(WriteFileAtomically(env_, RecordOrderPath(o_), recording->text()));
  }
  RETURN_IF_ERROR(CheckCorruption(train_source));
  int64_t trained = result_.train.samples;  // over every rank
  if (IsDistributed(o_)) RETURN_IF_ERROR(o_.comm->AllReduceSum(&trained, 1));
  if (trained == 0 && !result_.train.stopped_early) {
    return absl::FailedPreconditionError("the run trained 0 samples");
  }
  RETURN_IF_ERROR(FinishRecord(train_source, backend));
  result_.run.other_cores_busy = other_cores_busy;
  result_.run.process_cores_busy = ProcessCoresBusy(load_before, load_after);
  if (!o_.export_safetensors.empty() && IsRankZero(o_)) {
    RETURN_IF_ERROR(ExportWeights(env_, o_.export_safetensors, backend));
  }
  return std::move(result_);
}

}  // namespace

absl::StatusOr<TrainJobResult> RunTrainJob(Env* env, const TrainJobOptions& options) {
  TrainJob job(env, options);
  return job.Run();
}

int DefaultComputeThreads(int cores, int pipeline_threads) {
  cores = std::max(1, cores);
  if (pipeline_threads <= 0) pipeline_threads = cores;
  return std::max(1, cores - std::min(cores / 4, pipeline_threads));
}

int ComputeThreadsFor(const TrainJobOptions& options) {
  if (options.backend.cpu.threads > 0) return options.backend.cpu.threads;
  return DefaultComputeThreads(UsableCores(), options.pipeline.resources.threads);
}

CeilingOptions CeilingOptionsFor(const TrainJobOptions& o) {
  CeilingOptions c;
  c.batch_size = o.pipeline.order.batch_size;
  c.format = o.pipeline.format;
  c.backend = o.backend;
  c.backend.cpu.threads = ComputeThreadsFor(o);  // as many threads as the run computes on
  c.model = o.model;
  c.optimizer = o.optimizer;
  c.cache_dir = o.cache_dir;
  return c;
}

}  // namespace sluice
