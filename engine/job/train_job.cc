#include "engine/job/train_job.h"

#include <cstdlib>
#include <numeric>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/json_fields.h"
#include "common/status_macros.h"
#include "engine/job/autotune.h"
#include "engine/job/measured_backend.h"
#include "engine/checkpoint.h"
#include "engine/job/pipeline_batch_source.h"
#include "engine/job/run_limits.h"
#include "engine/safetensors.h"
#include "nlohmann/json.hpp"
#include "storage/dataset_writer.h"
#include "storage/idx.h"

namespace sluice {
namespace {

// Finds "<prefix>-images-idx3-ubyte[.gz]" style files in `dir`.
absl::StatusOr<std::pair<std::string, std::string>> FindIdxPair(Env* env, const std::string& dir,
                                                                const std::string& split) {
  const std::vector<std::string> prefixes =
      split == "test" ? std::vector<std::string>{"t10k", "test"} : std::vector<std::string>{split};
  for (const std::string& prefix : prefixes) {
    for (const char* suffix : {".gz", ""}) {
      std::string images = JoinPath(dir, absl::StrCat(prefix, "-images-idx3-ubyte", suffix));
      std::string labels = JoinPath(dir, absl::StrCat(prefix, "-labels-idx1-ubyte", suffix));
      if (env->FileExists(images) && env->FileExists(labels)) return std::make_pair(images, labels);
    }
  }
  return absl::NotFoundError(absl::StrCat(
      dir, ": no ", ManifestFileName(split), " and no IDX files for split \"", split,
      "\" (expected e.g. ", prefixes[0], "-images-idx3-ubyte.gz and ", prefixes[0],
      "-labels-idx1-ubyte.gz)"));
}

absl::StatusOr<std::unique_ptr<Dataset>> ShardIdxIntoCache(Env* env, const std::string& dir,
                                                           const std::string& split,
                                                           const std::string& cache_dir) {
  ASSIGN_OR_RETURN(auto files, FindIdxPair(env, dir, split));
  ASSIGN_OR_RETURN(std::string images, ReadFileToString(env, files.first));
  ASSIGN_OR_RETURN(std::string labels, ReadFileToString(env, files.second));
  // The cache key is the content of both files, so a changed file is sharded again.
  Xxh3Stream key;
  key.Update(images);
  key.Update(labels);
  const std::string out = JoinPath(cache_dir, ChecksumToHex(key.Digest()));
  const std::string manifest = JoinPath(out, ManifestFileName(split));
  if (env->FileExists(manifest)) {
    auto cached = Dataset::Open(env, manifest, split);
    if (cached.ok()) return cached;
  }
  ASSIGN_OR_RETURN(RecordArrays records,
                   ParseIdxPair(images, files.first, labels, files.second));
  WriteDatasetOptions options;
  options.sources = {{"images", BaseName(files.first), images.size(), Xxh3(images)},
                     {"labels", BaseName(files.second), labels.size(), Xxh3(labels)}};
  RETURN_IF_ERROR(WriteDataset(env, out, split, records, options).status());
  return Dataset::Open(env, manifest, split);
}

// --metrics-out: one JSON line per epoch, written through the Env. The whole file is
// rewritten atomically after each epoch (it is small), so a crash never leaves a torn line.
class MetricsLog {
 public:
  // `keep_existing`: a resumed run continues the file of the interrupted one.
  static absl::StatusOr<MetricsLog> Open(Env* env, const std::string& path, bool keep_existing) {
    MetricsLog log(env, path);
    if (keep_existing && env->FileExists(path)) {
      ASSIGN_OR_RETURN(log.text_, ReadFileToString(env, path));
      return log;
    }
    RETURN_IF_ERROR(WriteFileAtomically(env, path, ""));
    return log;
  }

  absl::Status Append(const EpochSummary& s) {
    nlohmann::ordered_json j;
    SLUICE_JSON_SET_FIELDS(j, s, epoch, train_loss, train_accuracy, train_samples, seconds,
                           samples_per_second);
    if (s.test) {
      j["test_loss"] = s.test->samples ? s.test->loss_sum / s.test->samples : 0.0;
      j["test_accuracy"] = s.test->accuracy();
      j["test_samples"] = s.test->samples;
    }
    text_ += j.dump() + "\n";
    return WriteFileAtomically(env_, path_, text_);
  }

 private:
  MetricsLog(Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  Env* env_;
  std::string path_;
  std::string text_;
};

}  // namespace

std::string CheckpointPath(const std::string& checkpoint_dir) {
  return JoinPath(checkpoint_dir, "checkpoint.sluice");
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenOrShardDataset(Env* env, const std::string& path,
                                                            const std::string& split,
                                                            const std::string& cache_dir) {
  if (!env->FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  auto dataset = Dataset::Open(env, path, split);
  if (dataset.ok() || dataset.status().code() != absl::StatusCode::kNotFound ||
      absl::EndsWith(path, kManifestSuffix)) {
    return dataset;
  }
  // A directory without manifests: maybe IDX files.
  auto sharded = ShardIdxIntoCache(env, path, split, cache_dir.empty() ? DefaultCacheDir() : cache_dir);
  if (sharded.status().code() == absl::StatusCode::kNotFound) return dataset.status();
  return sharded;
}

namespace {

// The datasets of a run: the train split and, when evaluating, the test split.
struct Splits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;  // null: no evaluation
};

absl::Status CheckTrainable(const Dataset& train, const ModelConfig& model) {
  const RecordSpec& spec = train.spec();
  if (spec.sample_dtype != SampleDType::kU8) {
    return absl::InvalidArgumentError(absl::StrCat(
        train.manifest_path(), ": samples are ", SampleDTypeName(spec.sample_dtype),
        "; sluice-train trains on u8 images (as MNIST)"));
  }
  if (model.layers.front() != static_cast<int>(spec.sample_values())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layers: the first layer has %d inputs but %s holds samples of %d values (%dx%dx%d)",
        model.layers.front(), train.manifest_path(), spec.sample_values(), spec.height,
        spec.width, spec.channels));
  }
  return absl::OkStatus();
}

// The test split: --test-data, else the train split's "test" sibling, else (IDX input) the
// directory's t10k files; null when there is none.
absl::StatusOr<std::unique_ptr<Dataset>> OpenTestSplit(Env* env, const TrainJobOptions& options,
                                                       const Dataset& train) {
  std::unique_ptr<Dataset> test;
  if (!options.test_data.empty()) {
    ASSIGN_OR_RETURN(test, OpenOrShardDataset(env, options.test_data, "test", options.cache_dir));
  } else if (auto sibling = train.SiblingManifest("test"); sibling.ok()) {
    ASSIGN_OR_RETURN(test, Dataset::Open(env, *sibling, "test"));
  } else if (!absl::EndsWith(options.data, kManifestSuffix) &&
             !env->FileExists(JoinPath(options.data, ManifestFileName("train")))) {
    auto idx_test = OpenOrShardDataset(env, options.data, "test", options.cache_dir);
    if (idx_test.ok()) test = std::move(*idx_test);
  }
  if (test != nullptr && !(test->spec() == train.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        test->manifest_path(), ": records differ in shape or type from ", train.manifest_path()));
  }
  return test;
}

absl::StatusOr<Splits> OpenSplits(Env* env, const TrainJobOptions& options) {
  Splits splits;
  ASSIGN_OR_RETURN(splits.train, OpenOrShardDataset(env, options.data, "train", options.cache_dir));
  RETURN_IF_ERROR(CheckTrainable(*splits.train, options.model));
  if (options.evaluate) {
    ASSIGN_OR_RETURN(splits.test, OpenTestSplit(env, options, *splits.train));
  }
  return splits;
}

// The checkpoint --resume names ("auto": the checkpoint directory's, when there is one).
absl::StatusOr<std::optional<Checkpoint>> LoadResumeCheckpoint(Env* env,
                                                               const TrainJobOptions& options) {
  std::string path = options.resume;
  if (path == "auto") {
    path = options.checkpoint_dir.empty() ? "" : CheckpointPath(options.checkpoint_dir);
    if (!path.empty() && !env->FileExists(path)) path.clear();
  }
  if (path.empty()) return std::optional<Checkpoint>();
  ASSIGN_OR_RETURN(Checkpoint checkpoint, ReadCheckpoint(env, path));
  if (checkpoint.state.model.layers != options.model.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the checkpoint's model does not match --layers"));
  }
  return std::optional<Checkpoint>(std::move(checkpoint));
}

// The train pipeline's options. Placement follows from the backend that reads the batches:
// the CPU backend gets host batches, a device backend batches uploaded to its device.
PipelineOptions TrainPipelineOptions(const TrainJobOptions& options, const Backend& backend) {
  PipelineOptions p = options.pipeline;
  p.order.seed = options.seed;
  p.placement.device = backend.device();
  // A stage made free by a what-if run skips its injected delay too: the delay is part of the
  // stage's work, and the what-if table must show what removing that work buys.
  switch (p.diagnostics.what_if) {
    case WhatIf::kRead: p.diagnostics.inject_delay_us[static_cast<int>(Stage::kRead)] = 0; break;
    case WhatIf::kDecompress:
      p.diagnostics.inject_delay_us[static_cast<int>(Stage::kDecompress)] = 0;
      break;
    case WhatIf::kPreprocess:
      p.diagnostics.inject_delay_us[static_cast<int>(Stage::kPreprocess)] = 0;
      break;
    case WhatIf::kH2D: p.diagnostics.inject_delay_us[static_cast<int>(Stage::kH2D)] = 0; break;
    case WhatIf::kNone: break;
  }
  return p;
}

// Evaluation reads the test split in file order, with no diagnostics.
PipelineOptions TestPipelineOptions(const TrainJobOptions& options, const Backend& backend) {
  PipelineOptions p = options.pipeline;
  p.order.shuffle = false;
  p.order.drop_last = false;
  p.placement.device = backend.device();
  p.diagnostics = PipelineDiagnostics{};
  return p;
}

TrainerOptions MakeTrainerOptions(Env* env, const TrainJobOptions& options,
                                  uint64_t train_records) {
  TrainerOptions t;
  t.epochs = options.epochs;
  t.optimizer = options.optimizer;
  if (options.optimizer.schedule == LrSchedule::kCosine && options.optimizer.total_steps == 0) {
    const uint64_t b = options.pipeline.order.batch_size, n = train_records;
    const uint64_t per_epoch = options.pipeline.order.drop_last ? n / b : (n + b - 1) / b;
    t.optimizer.total_steps = static_cast<int64_t>(per_epoch * options.epochs);
  }
  t.progress_every_steps = options.progress_every_steps;
  t.seed = options.seed;
  t.env = env;
  t.run_config = options.run_config;
  t.stop_after_steps = options.stop_after_steps;
  t.stop_requested = options.stop_requested;
  t.on_progress = options.on_progress;
  return t;
}

// What the diagnostics read, from the pipeline's and the backend's statistics so far.
RunRecord RecordRun(const PipelineBatchSource& source, MeasuredBackend& backend) {
  RunRecord r;
  if (source.pipeline() != nullptr) r.pipeline = source.pipeline()->Stats();
  r.compute = backend.stats();
  r.memory = backend.memory();
  r.device = backend.name();
  r.samples = r.compute.samples;
  r.train_seconds = (r.compute.last_end_ns - r.compute.first_start_ns) * 1e-9;
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
                                            PipelineBatchSource& source,
                                            MeasuredBackend& backend, double epoch_seconds,
                                            uint64_t features) {
  const PipelineStats stats = source.pipeline()->Stats();
  const PipelineOptions& current = source.pipeline()->options();
  AutotuneBudget budget;
  budget.cpu_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  budget.memory_bytes = options.autotune_memory_bytes;
  const uint64_t batch_bytes = uint64_t{current.order.batch_size} *
                               (features * H2DFormatSize(current.format.h2d_format) + 4);
  AutotuneDecision decision =
      Autotune(current.resources, stats, backend.stats(), epoch_seconds, budget, batch_bytes);
  if (decision.changed) source.Retune(decision.resources);
  return decision.reasons;
}

}  // namespace

absl::StatusOr<TrainJobResult> RunTrainJob(Env* env, const TrainJobOptions& options) {
  if (options.data.empty()) return absl::InvalidArgumentError("--data: a dataset is required");
  if (options.epochs < 1) return absl::InvalidArgumentError("--epochs: must be at least 1");
  TrainJobResult result;
  ASSIGN_OR_RETURN(Splits splits, OpenSplits(env, options));
  result.train_records = splits.train->record_count();
  result.train_manifest = splits.train->manifest_path();
  if (splits.test != nullptr) {
    result.test_records = splits.test->record_count();
    result.test_manifest = splits.test->manifest_path();
  }
  RETURN_IF_ERROR(CheckRunFits(options, *splits.train));  // before anything is allocated
  const uint64_t features = splits.train->spec().sample_values();

  // Model state: fresh, or from the checkpoint being resumed.
  ASSIGN_OR_RETURN(std::optional<Checkpoint> checkpoint, LoadResumeCheckpoint(env, options));
  const ModelState initial = checkpoint ? checkpoint->state
                                        : InitModelState(options.model, options.optimizer,
                                                         options.seed);
  BackendOptions backend_options = options.backend;
  backend_options.max_batch = static_cast<int>(options.pipeline.order.batch_size);
  backend_options.normalization = options.pipeline.format.normalization;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> device,
                   CreateBackend(options.device, initial, options.optimizer, backend_options));
  MeasuredBackend backend(device.get(), options.compute_free,
                          options.compute_free ? 0 : options.inject_compute_delay_us,
                          options.pipeline.diagnostics.trace_capacity > 0);

  auto compute_stream = [&backend] { return backend.compute_stream(); };
  PipelineBatchSource train_source(splits.train.get(), TrainPipelineOptions(options, backend),
                                   options.epochs, compute_stream);
  std::unique_ptr<PipelineBatchSource> test_source;
  if (splits.test != nullptr) {
    test_source = std::make_unique<PipelineBatchSource>(
        splits.test.get(), TestPipelineOptions(options, backend), 1, compute_stream);
  }

  TrainerOptions trainer_options = MakeTrainerOptions(env, options, result.train_records);
  AddIntermediateReports(options, train_source, backend, &trainer_options);
  if (!options.checkpoint_dir.empty()) {
    RETURN_IF_ERROR(env->CreateDirs(options.checkpoint_dir));
    result.checkpoint_path = CheckpointPath(options.checkpoint_dir);
    trainer_options.checkpoint_path = result.checkpoint_path;
    trainer_options.checkpoint_every_steps = options.checkpoint_every;
  }
  std::optional<MetricsLog> metrics;
  if (!options.metrics_out.empty()) {
    ASSIGN_OR_RETURN(metrics, MetricsLog::Open(env, options.metrics_out,
                                               /*keep_existing=*/checkpoint.has_value()));
  }
  absl::Status metrics_status;
  bool autotuned = false;
  trainer_options.on_epoch_end = [&](const EpochSummary& s) {
    if (metrics && metrics_status.ok()) metrics_status = metrics->Append(s);
    if (options.autotune && !autotuned && train_source.pipeline() != nullptr) {
      autotuned = true;
      result.autotune = AutotuneAfterEpoch(options, train_source, backend, s.seconds, features);
      if (options.on_autotune) options.on_autotune(result.autotune);
    }
    if (options.on_epoch_end) options.on_epoch_end(s);
  };

  Trainer trainer(&backend, &train_source, test_source.get(), trainer_options);
  if (checkpoint) {
    RETURN_IF_ERROR(trainer.Resume(*checkpoint));
    result.resumed = true;
    result.resumed_epoch = checkpoint->epoch;
    result.resumed_step = checkpoint->step_in_epoch;
  }
  ASSIGN_OR_RETURN(result.train, trainer.Run());
  RETURN_IF_ERROR(metrics_status);

  result.run = RecordRun(train_source, backend);
  result.run.samples = static_cast<uint64_t>(result.train.samples);
  result.run.train_seconds = result.train.train_seconds;
  if (train_source.pipeline() != nullptr) result.run.trace = train_source.pipeline()->Trace();
  result.run.compute_spans = backend.TakeSpans();
  result.run.memory_formula =
      ComputeMemoryFormula(options.model, options.optimizer, backend_options.max_batch);
  if (!options.export_safetensors.empty()) {
    ASSIGN_OR_RETURN(ModelState state, backend.SaveState());
    RETURN_IF_ERROR(ExportSafetensors(env, options.export_safetensors, state));
  }
  return result;
}

CeilingOptions CeilingOptionsFor(const TrainJobOptions& o) {
  CeilingOptions c;
  c.batch_size = o.pipeline.order.batch_size;
  c.h2d_format = o.pipeline.format.h2d_format;
  c.normalization = o.pipeline.format.normalization;
  c.device = o.device;
  c.model = o.model;
  c.optimizer = o.optimizer;
  c.backend = o.backend;
  c.cache_dir = o.cache_dir;
  return c;
}

}  // namespace sluice
