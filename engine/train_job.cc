#include "engine/train_job.h"

#include <cstdlib>
#include <numeric>
#include <thread>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "engine/autotune.h"
#include "engine/checkpoint.h"
#include "engine/pipeline_batch_source.h"
#include "engine/safetensors.h"
#include "nlohmann/json.hpp"
#include "pipeline/internal/stage_recorder.h"
#include "storage/dataset_writer.h"
#include "storage/idx.h"

namespace sluice {
namespace {

// Measures every train step from the consumer's side and implements the compute what-if and
// delay diagnostics. Everything else is forwarded.
class MeasuredBackend final : public Backend {
 public:
  MeasuredBackend(Backend* inner, bool compute_free, int64_t delay_us, bool keep_spans)
      : inner_(inner), compute_free_(compute_free), delay_us_(delay_us),
        keep_spans_(keep_spans) {
    stats_.device = inner->name();
    stats_.is_cuda = inner->is_cuda();
  }
  std::string name() const override { return inner_->name(); }
  bool is_cuda() const override { return inner_->is_cuda(); }
  absl::Status TrainStep(const BatchView& batch, float lr) override {
    const int64_t start = NowNs();
    if (stats_.first_start_ns == 0) stats_.first_start_ns = start;
    absl::Status status;
    if (compute_free_) {
      free_samples_ += batch.size;
    } else {
      status = inner_->TrainStep(batch, lr);
    }
    // The same busy-wait the pipeline's stages use for their injected delays.
    if (delay_us_ > 0) pipeline_internal::SpinFor(delay_us_);
    const int64_t end = NowNs();
    stats_.busy_ns += end - start;
    stats_.last_end_ns = end;
    ++stats_.steps;
    stats_.samples += batch.size;
    if (keep_spans_) spans_.push_back({stats_.steps - 1, start, end});
    return status;
  }
  absl::StatusOr<LossStats> TakeLoss() override {
    if (!compute_free_) return inner_->TakeLoss();
    LossStats loss;
    loss.samples = free_samples_;
    free_samples_ = 0;
    return loss;
  }
  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override {
    if (compute_free_) {
      stats->samples += batch.size;
      return absl::OkStatus();
    }
    return inner_->Evaluate(batch, stats);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<ModelState> SaveState() override { return inner_->SaveState(); }
  absl::Status LoadState(const ModelState& state) override { return inner_->LoadState(state); }
  MemoryReport memory() const override { return inner_->memory(); }
  void* compute_stream() const override { return inner_->compute_stream(); }

  const ComputeStats& stats() const { return stats_; }
  std::vector<ComputeSpan> TakeSpans() { return std::move(spans_); }

 private:
  Backend* inner_;
  bool compute_free_;
  int64_t delay_us_;
  bool keep_spans_;
  int64_t free_samples_ = 0;
  ComputeStats stats_;
  std::vector<ComputeSpan> spans_;
};

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

absl::Status AppendMetrics(const std::string& path, const EpochSummary& s) {
  nlohmann::ordered_json j;
  j["epoch"] = s.epoch;
  j["train_loss"] = s.train_loss;
  j["train_accuracy"] = s.train_accuracy;
  j["train_samples"] = s.train_samples;
  j["seconds"] = s.seconds;
  j["samples_per_second"] = s.samples_per_second;
  if (s.test) {
    j["test_loss"] = s.test->samples ? s.test->loss_sum / s.test->samples : 0.0;
    j["test_accuracy"] = s.test->accuracy();
    j["test_samples"] = s.test->samples;
  }
  std::ofstream out(path, std::ios::app);
  out << j.dump() << "\n";
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot append metrics"));
  return absl::OkStatus();
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* d = std::getenv("SLUICE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return JoinPath(d, "sluice");
  if (const char* d = std::getenv("HOME"); d && *d) return JoinPath(d, ".cache/sluice");
  return "/tmp/sluice-cache";
}

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

absl::StatusOr<TrainJobResult> RunTrainJob(Env* env, const TrainJobOptions& options) {
  if (options.data.empty()) return absl::InvalidArgumentError("--data: a dataset is required");
  if (options.epochs < 1) return absl::InvalidArgumentError("--epochs: must be at least 1");
  TrainJobResult result;
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> train,
                   OpenOrShardDataset(env, options.data, "train", options.cache_dir));
  const RecordSpec& spec = train->spec();
  const uint64_t features = spec.sample_values();
  if (spec.sample_dtype != SampleDType::kU8) {
    return absl::InvalidArgumentError(absl::StrCat(
        train->manifest_path(), ": samples are ", SampleDTypeName(spec.sample_dtype),
        "; sluice-train trains on u8 images (as MNIST)"));
  }
  if (options.model.layers.front() != static_cast<int>(features)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layers: the first layer has %d inputs but %s holds samples of %d values (%dx%dx%d)",
        options.model.layers.front(), train->manifest_path(), features, spec.height, spec.width,
        spec.channels));
  }
  result.train_records = train->record_count();
  result.train_manifest = train->manifest_path();

  std::unique_ptr<Dataset> test;
  if (options.evaluate) {
    if (!options.test_data.empty()) {
      ASSIGN_OR_RETURN(test, OpenOrShardDataset(env, options.test_data, "test", options.cache_dir));
    } else if (auto sibling = train->SiblingManifest("test"); sibling.ok()) {
      ASSIGN_OR_RETURN(test, Dataset::Open(env, *sibling, "test"));
    } else if (!absl::EndsWith(options.data, kManifestSuffix) &&
               !env->FileExists(JoinPath(options.data, ManifestFileName("train")))) {
      // IDX directory input: its t10k files are the test split.
      auto idx_test = OpenOrShardDataset(env, options.data, "test", options.cache_dir);
      if (idx_test.ok()) test = std::move(*idx_test);
    }
    if (test != nullptr) {
      if (!(test->spec() == spec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            test->manifest_path(), ": records differ in shape or type from ",
            train->manifest_path()));
      }
      result.test_records = test->record_count();
      result.test_manifest = test->manifest_path();
    }
  }

  // Model state: fresh, or from the checkpoint being resumed.
  std::optional<Checkpoint> checkpoint;
  std::string resume_path = options.resume;
  if (resume_path == "auto") {
    resume_path = options.checkpoint_dir.empty() ? "" : CheckpointPath(options.checkpoint_dir);
    if (!resume_path.empty() && !env->FileExists(resume_path)) resume_path.clear();
  }
  if (!resume_path.empty()) {
    ASSIGN_OR_RETURN(checkpoint, ReadCheckpoint(env, resume_path));
    if (checkpoint->state.model.layers != options.model.layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          resume_path, ": the checkpoint's model does not match --layers"));
    }
  }
  ModelState initial = checkpoint ? checkpoint->state
                                  : InitModelState(options.model, options.optimizer, options.seed);
  BackendOptions backend_options = options.backend;
  backend_options.max_batch = static_cast<int>(options.pipeline.batch_size);
  backend_options.normalization = options.pipeline.normalization;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> device,
                   CreateBackend(options.device, initial, options.optimizer, backend_options));
  MeasuredBackend backend(device.get(), options.compute_free,
                          options.compute_free ? 0 : options.inject_compute_delay_us,
                          options.pipeline.trace_capacity > 0);
  result.backend_name = backend.name();

  PipelineOptions train_options = options.pipeline;
  train_options.seed = options.seed;
  // A stage made free by a what-if run skips its injected delay too: the delay is part of the
  // stage's work, and the what-if table must show what removing that work buys.
  switch (train_options.what_if) {
    case WhatIf::kRead: train_options.inject_delay_us[static_cast<int>(Stage::kRead)] = 0; break;
    case WhatIf::kDecompress:
      train_options.inject_delay_us[static_cast<int>(Stage::kDecompress)] = 0;
      break;
    case WhatIf::kPreprocess:
      train_options.inject_delay_us[static_cast<int>(Stage::kPreprocess)] = 0;
      break;
    case WhatIf::kH2D: train_options.inject_delay_us[static_cast<int>(Stage::kH2D)] = 0; break;
    case WhatIf::kNone: break;
  }
  PipelineBatchSource train_source(train.get(), train_options, options.epochs,
                                   [&backend] { return backend.compute_stream(); });
  std::unique_ptr<PipelineBatchSource> test_source;
  if (test != nullptr) {
    PipelineOptions test_options = options.pipeline;
    test_options.shuffle = false;
    test_options.drop_last = false;
    test_options.what_if = WhatIf::kNone;
    test_options.inject_delay_us = {};
    test_options.trace_capacity = 0;
    test_source = std::make_unique<PipelineBatchSource>(
        test.get(), test_options, 1, [&backend] { return backend.compute_stream(); });
  }

  TrainerOptions trainer_options;
  trainer_options.epochs = options.epochs;
  trainer_options.optimizer = options.optimizer;
  if (options.optimizer.schedule == LrSchedule::kCosine && options.optimizer.total_steps == 0) {
    const uint64_t b = options.pipeline.batch_size, n = train->record_count();
    const uint64_t per_epoch = options.pipeline.drop_last ? n / b : (n + b - 1) / b;
    trainer_options.optimizer.total_steps = static_cast<int64_t>(per_epoch * options.epochs);
  }
  trainer_options.progress_every_steps = options.progress_every_steps;
  trainer_options.seed = options.seed;
  trainer_options.env = env;
  trainer_options.run_config = options.run_config;
  trainer_options.stop_after_steps = options.stop_after_steps;
  trainer_options.on_progress = options.on_progress;
  // Intermediate reports ride on the progress callback (it runs on the training thread
  // between steps, so reading the statistics there is safe).
  int64_t next_report = options.report_every_steps;
  if (options.report_every_steps > 0 && options.on_report) {
    trainer_options.progress_every_steps =
        std::gcd(options.progress_every_steps > 0 ? options.progress_every_steps
                                                  : options.report_every_steps,
                 options.report_every_steps);
    trainer_options.on_progress = [&, next_report](const TrainProgress& p) mutable {
      if (options.on_progress && options.progress_every_steps > 0 &&
          p.optimizer_steps % options.progress_every_steps == 0) {
        options.on_progress(p);
      }
      if (p.optimizer_steps < next_report) return;
      next_report += options.report_every_steps;
      TrainJobResult partial;
      if (train_source.pipeline() != nullptr) partial.pipeline = train_source.pipeline()->Stats();
      partial.compute = backend.stats();
      partial.memory = backend.memory();
      partial.backend_name = backend.name();
      partial.train.samples = static_cast<int64_t>(partial.compute.samples);
      partial.train.train_seconds =
          (partial.compute.last_end_ns - partial.compute.first_start_ns) * 1e-9;
      options.on_report(partial);
    };
  }
  if (!options.checkpoint_dir.empty()) {
    RETURN_IF_ERROR(env->CreateDirs(options.checkpoint_dir));
    result.checkpoint_path = CheckpointPath(options.checkpoint_dir);
    trainer_options.checkpoint_path = result.checkpoint_path;
    trainer_options.checkpoint_every_steps = options.checkpoint_every;
  }
  if (!options.metrics_out.empty()) {
    // Truncate unless resuming: a resumed run appends its epochs.
    if (!checkpoint) RETURN_IF_ERROR(WriteFileAtomically(env, options.metrics_out, ""));
  }
  absl::Status metrics_status;
  bool autotuned = false;
  trainer_options.on_epoch_end = [&](const EpochSummary& s) {
    if (!options.metrics_out.empty() && metrics_status.ok()) {
      metrics_status = AppendMetrics(options.metrics_out, s);
    }
    if (options.autotune && !autotuned && train_source.pipeline() != nullptr) {
      autotuned = true;
      const PipelineStats stats = train_source.pipeline()->Stats();
      PipelineOptions current = train_source.pipeline()->options();
      AutotuneBudget budget;
      budget.cpu_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      budget.memory_bytes = options.autotune_memory_bytes;
      const uint64_t batch_bytes =
          uint64_t{current.batch_size} * (features * H2DFormatSize(current.h2d_format) + 4);
      AutotuneDecision decision =
          Autotune(current, stats, backend.stats(), s.seconds, budget, batch_bytes);
      if (decision.changed) train_source.Retune(decision.options);
      result.autotune = decision.reasons;
      if (options.on_autotune) options.on_autotune(decision.reasons);
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

  if (train_source.pipeline() != nullptr) {
    result.pipeline = train_source.pipeline()->Stats();
    result.trace = train_source.pipeline()->Trace();
  }
  result.compute = backend.stats();
  result.compute_spans = backend.TakeSpans();
  result.memory = backend.memory();
  result.memory_formula =
      ComputeMemoryFormula(options.model, options.optimizer, backend_options.max_batch);
  if (!options.export_safetensors.empty()) {
    ASSIGN_OR_RETURN(ModelState state, backend.SaveState());
    RETURN_IF_ERROR(ExportSafetensors(env, options.export_safetensors, state));
  }
  return result;
}

}  // namespace sluice
