#include "engine/job/train_job.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/file_lock.h"
#include "common/limits.h"
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
    // A directory's only split is opened when it has no test split: refuse it when that split
    // is a train split (evaluating on training data is not what --test-data asked for).
    if (!absl::EndsWith(options.test_data, kManifestSuffix) &&
        BaseName(test->manifest_path()) == ManifestFileName("train")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--test-data ", options.test_data, ": no test split (expected ",
          JoinPath(options.test_data, ManifestFileName("test")), "; the only split there is ",
          test->manifest_path(), ")"));
    }
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

// Where a checkpoint stands, for messages: "epoch 2 step 125 (4000 samples into the epoch,
// 12000 in total)".
std::string DescribePosition(const Checkpoint& c) {
  return absl::StrCat("epoch ", c.epoch + 1, " step ", c.step_in_epoch, " (", c.samples_in_epoch,
                      " samples into the epoch, ", c.samples_total, " in total, optimizer step ",
                      c.state.optimizer_steps, ")");
}

// The checkpoint --resume names ("auto": the checkpoint directory's, when there is one), checked
// to continue the same run: its identity must equal `identity`.
absl::StatusOr<std::optional<Checkpoint>> LoadResumeCheckpoint(Env* env,
                                                               const TrainJobOptions& options,
                                                               const KeyValues& identity) {
  std::string path = options.resume;
  if (path == "auto") {
    path = options.checkpoint_dir.empty() ? "" : CheckpointPath(options.checkpoint_dir);
    if (!path.empty() && !env->FileExists(path)) {
      // Listed in the directory but not there: a dangling or looping symlink. Starting afresh
      // would silently throw the run away.
      auto children = env->GetChildren(options.checkpoint_dir);
      if (children.ok() && std::find(children->begin(), children->end(), BaseName(path)) !=
                               children->end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            path, ": --resume=auto: the checkpoint is listed but cannot be opened (a dangling "
            "or looping symlink?); fix or remove it"));
      }
      path.clear();
    }
  }
  if (path.empty()) return std::optional<Checkpoint>();
  ASSIGN_OR_RETURN(Checkpoint checkpoint, ReadCheckpoint(env, path));
  std::vector<std::string> differences = IdentityDifferences(checkpoint.identity, identity);
  if (!differences.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": cannot resume: the checkpoint, at ", DescribePosition(checkpoint),
        ", belongs to a run with other settings; ", absl::StrJoin(differences, "; "),
        " (resume with the checkpoint's settings, or start a new run elsewhere)"));
  }
  if (checkpoint.state.model.layers != options.model.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the checkpoint's model does not match --layers"));
  }
  if (checkpoint.epoch >= options.epochs) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": nothing to train: the checkpoint is at ", DescribePosition(checkpoint),
        ", and --epochs is ", options.epochs, " (raise --epochs to continue the run)"));
  }
  return std::optional<Checkpoint>(std::move(checkpoint));
}

std::string FloatText(float v) { return absl::StrFormat("%.9g", v); }

bool Distributed(const TrainJobOptions& options) {
  return options.comm != nullptr && options.comm->is_distributed();
}
bool IsRankZero(const TrainJobOptions& options) {
  return options.comm == nullptr || options.comm->rank() == 0;
}
DataParallelSlice Slice(const TrainJobOptions& options) {
  if (!Distributed(options)) return {};
  return {static_cast<uint32_t>(options.comm->rank()),
          static_cast<uint32_t>(options.comm->size())};
}

// --resume in a data-parallel run: rank 0 reads and checks the checkpoint and broadcasts it (or
// its error), so the other ranks need no shared file system and fail with the same message.
absl::StatusOr<std::optional<Checkpoint>> ShareResumeCheckpoint(
    const TrainJobOptions& options,
    const std::function<absl::StatusOr<std::optional<Checkpoint>>()>& load) {
  if (!Distributed(options)) return load();
  dist::Communicator* comm = options.comm;
  // [kind][payload]: kind 0 no checkpoint, 1 an encoded checkpoint, 2 an error (code, text).
  std::string message;
  if (comm->rank() == 0) {
    absl::StatusOr<std::optional<Checkpoint>> loaded = load();
    if (!loaded.ok()) {
      message = absl::StrCat("2", static_cast<int>(loaded.status().code()), ":",
                             loaded.status().message());
    } else if (!loaded->has_value()) {
      message = "0";
    } else {
      absl::StatusOr<std::string> encoded = EncodeCheckpoint(**loaded);
      message = encoded.ok() ? absl::StrCat("1", *encoded)
                             : absl::StrCat("2", static_cast<int>(encoded.status().code()), ":",
                                            encoded.status().message());
    }
  }
  uint64_t length = message.size();
  RETURN_IF_ERROR(comm->Broadcast(&length, sizeof(length), 0));
  message.resize(length);
  RETURN_IF_ERROR(comm->Broadcast(message.data(), length, 0));
  if (message.empty()) return absl::InternalError("resume: empty broadcast from rank 0");
  if (message[0] == '0') return std::optional<Checkpoint>();
  if (message[0] == '2') {
    const size_t colon = message.find(':');
    const int code = std::atoi(message.substr(1, colon - 1).c_str());
    return absl::Status(static_cast<absl::StatusCode>(code), message.substr(colon + 1));
  }
  ASSIGN_OR_RETURN(Checkpoint checkpoint,
                   DecodeCheckpoint(absl::string_view(message).substr(1), "rank 0's checkpoint"));
  return std::optional<Checkpoint>(std::move(checkpoint));
}

// The train pipeline's options. Placement follows from the backend that reads the batches:
// the CPU backend gets host batches, a device backend batches uploaded to its device.
PipelineOptions TrainPipelineOptions(const TrainJobOptions& options, const Backend& backend) {
  PipelineOptions p = options.pipeline;
  p.order.seed = options.seed;
  p.placement.device = backend.device();
  p.slice = Slice(options);
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
  p.slice = Slice(options);
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
  budget.cpu_threads = UsableCores();
  budget.memory_bytes = options.autotune_memory_bytes;
  const uint64_t batch_bytes = uint64_t{current.order.batch_size} *
                               (features * H2DFormatSize(current.format.h2d_format) + 4);
  AutotuneDecision decision =
      Autotune(current.resources, stats, backend.stats(), epoch_seconds, budget, batch_bytes);
  if (decision.changed) source.Retune(decision.resources);
  return decision.reasons;
}

// --max-corrupt-fraction: skipped / read records of one split.
absl::Status CheckCorruptFraction(const std::string& split, const std::string& manifest,
                                  uint64_t skipped, uint64_t delivered,
                                  const std::vector<std::string>& messages, double limit) {
  if (skipped == 0) return absl::OkStatus();
  const double fraction = static_cast<double>(skipped) / static_cast<double>(skipped + delivered);
  if (fraction <= limit) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s: %d of %d records of the %s split read so far were skipped as corrupt (%.4g), above "
      "--max-corrupt-fraction=%g; first: %s",
      manifest, skipped, skipped + delivered, split, fraction, limit,
      messages.empty() ? std::string("(no message)") : messages.front()));
}

// --record-order: passes batches through and notes the record ids of each one.
class RecordingBatchSource final : public BatchSource {
 public:
  explicit RecordingBatchSource(BatchSource* inner) : inner_(inner) {}
  absl::Status Seek(uint64_t epoch, uint64_t step) override { return inner_->Seek(epoch, step); }
  absl::StatusOr<std::optional<BatchView>> Next() override {
    ASSIGN_OR_RETURN(std::optional<BatchView> batch, inner_->Next());
    if (batch) {
      absl::StrAppend(&text_, batch->epoch, " ", batch->step);
      for (uint32_t i = 0; i < batch->size; ++i) {
        absl::StrAppend(&text_, " ", batch->record_ids != nullptr ? batch->record_ids[i] : -1);
      }
      text_ += '\n';
    }
    return batch;
  }
  void Release(const BatchView& batch) override { inner_->Release(batch); }
  uint64_t batches_per_epoch() const override { return inner_->batches_per_epoch(); }
  KeyValues Describe() const override { return inner_->Describe(); }
  const std::string& text() const { return text_; }

 private:
  BatchSource* inner_;
  std::string text_;
};

// The host table (engine/memory.h). The backend's tagged memory is host memory on the CPU
// backend and on the simulated device (whose device memory is host memory), not on a GPU.
HostMemoryReport HostMemoryAfterRun(int64_t baseline_rss, const RunRecord& run,
                                    const PipelineStats& test_peak,
                                    const device::Device* device) {
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
  if (device == nullptr || device->platform() == "sim") {
    line("backend (all tags above)", static_cast<uint64_t>(run.memory.total_peak));
  }
  host.peak_rss = ReadProcessMemory().peak_rss_bytes;
  return host;
}

}  // namespace

KeyValues RunIdentity(const TrainJobOptions& o, const Dataset& train) {
  const OrderSpec& order = o.pipeline.order;
  const OptimizerConfig& opt = o.optimizer;
  KeyValues id = {
      {"data.manifest_xxh3", ChecksumToHex(Xxh3(train.manifest().ToJson()))},
      {"data.records", absl::StrCat(train.record_count())},
      {"batch_size", absl::StrCat(order.batch_size)},
      {"seed", absl::StrCat(o.seed)},
      {"shuffle", order.shuffle ? "1" : "0"},
      {"shuffle_window", absl::StrCat(order.shuffle_window_frames)},
      {"drop_last", order.drop_last ? "1" : "0"},
      {"normalize_mean", FloatText(o.pipeline.format.normalization.mean)},
      {"normalize_std", FloatText(o.pipeline.format.normalization.std)},
      {"model.layers", absl::StrJoin(o.model.layers, ",")},
      {"optimizer", opt.kind == OptimizerKind::kAdamW ? "adamw" : "sgd"},
      {"lr", FloatText(opt.lr)},
      {"weight_decay", FloatText(opt.weight_decay)},
  };
  if (opt.kind == OptimizerKind::kAdamW) {
    id.emplace_back("beta1", FloatText(opt.beta1));
    id.emplace_back("beta2", FloatText(opt.beta2));
    id.emplace_back("eps", FloatText(opt.eps));
  } else {
    id.emplace_back("momentum", FloatText(opt.momentum));
    id.emplace_back("nesterov", opt.nesterov ? "1" : "0");
  }
  return id;
}

absl::Status ProbeWritable(Env* env, const std::string& path, absl::string_view flag) {
  if (env->GetChildren(path).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", path, ": is a directory (expected a file path)"));
  }
  const std::string probe = absl::StrCat(path, ".probe");
  auto file = env->NewWritableFile(probe);
  absl::Status status = file.status();
  if (status.ok()) status = (*file)->Close();
  if (file.ok()) {
    file->reset();
    absl::Status removed = env->DeleteFile(probe);
    if (status.ok()) status = removed;
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path,
                                                   ": cannot be written: ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainJobResult> RunTrainJob(Env* env, const TrainJobOptions& options) {
  if (options.data.empty()) return absl::InvalidArgumentError("--data: a dataset is required");
  if (options.epochs < 1) return absl::InvalidArgumentError("--epochs: must be at least 1");
  // One job per checkpoint directory, for the job's whole life, taken before --resume=auto
  // looks for a checkpoint there (docs/formats/lock.md). Creates the directory.
  std::unique_ptr<FileLock> checkpoint_lock;
  const bool rank_zero = IsRankZero(options);
  if (!options.checkpoint_dir.empty() && rank_zero) {
    ASSIGN_OR_RETURN(checkpoint_lock,
                     FileLock::Acquire(env, options.checkpoint_dir, "sluice-train checkpoints"));
  }
  TrainJobResult result;
  // Resident memory before any dataset, pipeline or backend exists: the host table's baseline.
  const int64_t baseline_rss = ReadProcessMemory().rss_bytes;
  ASSIGN_OR_RETURN(Splits splits, OpenSplits(env, options));
  result.train_records = splits.train->record_count();
  result.train_manifest = splits.train->manifest_path();
  if (splits.test != nullptr) {
    result.test_records = splits.test->record_count();
    result.test_manifest = splits.test->manifest_path();
  }
  RETURN_IF_ERROR(CheckRunFits(options, *splits.train));  // before anything is allocated
  const uint64_t features = splits.train->spec().sample_values();
  if (options.pipeline.order.drop_last &&
      options.pipeline.order.batch_size > result.train_records) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drop-last with --batch-size ", options.pipeline.order.batch_size, " larger than the ",
        result.train_records, " records of ", result.train_manifest,
        ": no batch would be trained"));
  }
  if (!options.evaluate) {
    result.not_evaluated = "evaluation is off (--evaluate=false)";
  } else if (splits.test == nullptr) {
    result.not_evaluated = absl::StrCat("no test split beside ", result.train_manifest,
                                        " (give one with --test-data)");
  }
  // Outputs are checked before the first step: a run must not train and then lose its result.
  // Rank 0 writes them.
  if (!options.export_safetensors.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, options.export_safetensors, "export-safetensors"));
  }
  if (!options.metrics_out.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, options.metrics_out, "metrics-out"));
  }
  const std::string record_order_path =
      options.record_order_path.empty() || !Distributed(options)
          ? options.record_order_path
          : absl::StrCat(options.record_order_path, ".rank", options.comm->rank());
  if (!record_order_path.empty()) {
    RETURN_IF_ERROR(ProbeWritable(env, record_order_path, "record-order"));
  }
  if (!(options.max_corrupt_fraction >= 0 && options.max_corrupt_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-corrupt-fraction: must be in [0, 1], got ",
                                                   options.max_corrupt_fraction));
  }

  // Model state: fresh, or from the checkpoint being resumed (which must be of the same run).
  const KeyValues identity = RunIdentity(options, *splits.train);
  if (Distributed(options)) {
    // Every rank must train the same run: the identity (dataset, order, model, optimizer) and
    // the flags; the data path may differ between machines, its content may not.
    KeyValues same = identity;
    for (const auto& [key, value] : options.run_config) {
      if (key != "data" && key != "test_data" && key != "cache_dir") {
        same.emplace_back(absl::StrCat("--", key), value);
      }
    }
    // What decides when the ranks meet in a collective: these must match too, or one rank
    // would wait forever for the others.
    same.emplace_back("epochs", absl::StrCat(options.epochs));
    same.emplace_back("progress_every_steps", absl::StrCat(options.progress_every_steps));
    same.emplace_back("checkpoint_every", absl::StrCat(options.checkpoint_every));
    same.emplace_back("stop_after_steps", absl::StrCat(options.stop_after_steps));
    same.emplace_back("evaluate", options.evaluate ? "1" : "0");
    same.emplace_back("on_corrupt", options.pipeline.on_corrupt == OnCorrupt::kSkip ? "skip" : "fail");
    same.emplace_back("h2d_format", std::string(H2DFormatName(options.pipeline.format.h2d_format)));
    same.emplace_back("resume", options.resume);
    if (splits.test != nullptr) {
      same.emplace_back("test.manifest_xxh3",
                        ChecksumToHex(Xxh3(splits.test->manifest().ToJson())));
    }
    RETURN_IF_ERROR(dist::CheckSameOnAllRanks(options.comm, "the run's settings", same));
  }
  ASSIGN_OR_RETURN(std::optional<Checkpoint> checkpoint,
                   ShareResumeCheckpoint(options, [&] {
                     return LoadResumeCheckpoint(env, options, identity);
                   }));
  const ModelState initial = checkpoint ? checkpoint->state
                                        : InitModelState(options.model, options.optimizer,
                                                         options.seed);
  BackendOptions backend_options = options.backend;
  // Each rank trains its slice of the global batch: at most ceil(B / ranks) samples.
  const uint32_t world = Slice(options).world_size;
  backend_options.max_batch =
      static_cast<int>((options.pipeline.order.batch_size + world - 1) / world);
  std::unique_ptr<dist::Communicator> gradient_comm;
  if (Distributed(options) || options.backend.exchange_in_world_of_one) {
    // The exchange runs where the steps run (the sim device's compute stream): a communicator
    // of its own, so it never interleaves with this thread's collectives.
    if (options.comm != nullptr) {
      ASSIGN_OR_RETURN(gradient_comm, options.comm->Duplicate());
    } else {
      gradient_comm = dist::SingleProcessCommunicator();
    }
    backend_options.gradient_comm = gradient_comm.get();
  }
  if (Distributed(options)) {
    // Each rank on a machine takes its own device: cuda / sim / auto mean "device <local rank>".
    if (!absl::StrContains(options.device, ':')) {
      backend_options.device_ordinal = options.comm->local_rank();
    }
  }
  backend_options.normalization = options.pipeline.format.normalization;
  backend_options.threads = ComputeThreadsFor(options);
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
  trainer_options.identity = identity;
  AddIntermediateReports(options, train_source, backend, &trainer_options);
  // Corrupt frames skipped in the test split's evaluations, summed over epochs (the test
  // pipeline is rebuilt for each evaluation).
  uint64_t test_delivered = 0;
  PipelineStats test_peak;  // the buffer figures of the largest evaluation
  auto add_test_skips = [&] {
    if (test_source == nullptr || test_source->pipeline() == nullptr) return;
    const PipelineStats ts = test_source->pipeline()->Stats();
    test_peak.pool_bytes = std::max(test_peak.pool_bytes, ts.pool_bytes);
    test_peak.frame_buffer_bytes = std::max(test_peak.frame_buffer_bytes, ts.frame_buffer_bytes);
    test_peak.stored_buffer_bytes =
        std::max(test_peak.stored_buffer_bytes, ts.stored_buffer_bytes);
    result.run.test_skipped_frames += ts.skipped_frames;
    result.run.test_skipped_records += ts.skipped_records;
    test_delivered += ts.samples_delivered;
    for (const std::string& m : ts.corrupt_frames) {
      if (result.run.test_corrupt_frames.size() < 16 &&
          std::find(result.run.test_corrupt_frames.begin(), result.run.test_corrupt_frames.end(),
                    m) == result.run.test_corrupt_frames.end()) {
        result.run.test_corrupt_frames.push_back(m);
      }
    }
  };
  // The limit applies to the job: in a data-parallel run the counts are summed over the ranks
  // (every rank calls this at the same points), so the verdict does not depend on which rank a
  // corrupt frame's samples fell to.
  auto check_corrupt = [&]() -> absl::Status {
    int64_t counts[4] = {0, 0, static_cast<int64_t>(result.run.test_skipped_records),
                         static_cast<int64_t>(test_delivered)};
    std::vector<std::string> train_messages;
    if (train_source.pipeline() != nullptr) {
      const PipelineStats ps = train_source.pipeline()->Stats();
      counts[0] = static_cast<int64_t>(ps.skipped_records);
      counts[1] = static_cast<int64_t>(ps.samples_delivered);
      train_messages = ps.corrupt_frames;
    }
    std::vector<std::string> test_messages = result.run.test_corrupt_frames;
    if (Distributed(options)) {
      RETURN_IF_ERROR(options.comm->AllReduceSum(counts, 4));
      if (train_messages.empty()) train_messages.push_back("(on another rank)");
      if (test_messages.empty()) test_messages.push_back("(on another rank)");
    }
    RETURN_IF_ERROR(CheckCorruptFraction("train", result.train_manifest, counts[0], counts[1],
                                         train_messages, options.max_corrupt_fraction));
    return CheckCorruptFraction("test", result.test_manifest, counts[2], counts[3],
                                test_messages, options.max_corrupt_fraction);
  };
  trainer_options.check = check_corrupt;
  trainer_options.comm = options.comm;
  if (!options.checkpoint_dir.empty()) {
    result.checkpoint_path = CheckpointPath(options.checkpoint_dir);
    trainer_options.checkpoint_path = result.checkpoint_path;
    trainer_options.checkpoint_every_steps = options.checkpoint_every;
  }
  std::optional<MetricsLog> metrics;
  if (!options.metrics_out.empty() && rank_zero) {
    ASSIGN_OR_RETURN(metrics, MetricsLog::Open(env, options.metrics_out,
                                               /*keep_existing=*/checkpoint.has_value()));
  }
  absl::Status metrics_status;
  bool autotuned = false;
  trainer_options.on_epoch_end = [&](const EpochSummary& s) {
    add_test_skips();
    if (metrics && metrics_status.ok()) metrics_status = metrics->Append(s);
    if (options.autotune && !autotuned && train_source.pipeline() != nullptr) {
      autotuned = true;
      result.autotune = AutotuneAfterEpoch(options, train_source, backend, s.seconds, features);
      if (options.on_autotune) options.on_autotune(result.autotune);
    }
    if (options.on_epoch_end) options.on_epoch_end(s);
  };

  std::optional<RecordingBatchSource> recording;
  if (!options.record_order_path.empty()) recording.emplace(&train_source);
  Trainer trainer(&backend, recording ? static_cast<BatchSource*>(&*recording) : &train_source,
                  test_source.get(), trainer_options);
  if (checkpoint) {
    RETURN_IF_ERROR(trainer.Resume(*checkpoint));
    result.resumed = true;
    result.resumed_epoch = checkpoint->epoch;
    result.resumed_step = checkpoint->step_in_epoch;
    result.resumed_samples = checkpoint->samples_total;
  }
  ASSIGN_OR_RETURN(result.train, trainer.Run());
  RETURN_IF_ERROR(metrics_status);
  if (recording) RETURN_IF_ERROR(WriteFileAtomically(env, record_order_path, recording->text()));
  RETURN_IF_ERROR(check_corrupt());
  int64_t trained = result.train.samples;  // over every rank
  if (Distributed(options)) RETURN_IF_ERROR(options.comm->AllReduceSum(&trained, 1));
  if (trained == 0 && !result.train.stopped_early) {
    return absl::FailedPreconditionError("the run trained 0 samples");
  }

  RunRecord test_part = std::move(result.run);
  result.run = RecordRun(train_source, backend);
  result.run.test_skipped_frames = test_part.test_skipped_frames;
  result.run.test_skipped_records = test_part.test_skipped_records;
  result.run.test_corrupt_frames = std::move(test_part.test_corrupt_frames);
  result.run.not_evaluated = result.not_evaluated;
  result.run.samples = static_cast<uint64_t>(result.train.samples);
  result.run.train_seconds = result.train.train_seconds;
  if (train_source.pipeline() != nullptr) result.run.trace = train_source.pipeline()->Trace();
  result.run.compute_spans = backend.TakeSpans();
  result.run.exchange = backend.exchange();
  if (options.comm != nullptr) {
    result.run.rank = options.comm->rank();
    result.run.world_size = options.comm->size();
  }
  result.run.memory_formula =
      ComputeMemoryFormula(options.model, options.optimizer, backend_options.max_batch);
  result.run.host_memory =
      HostMemoryAfterRun(baseline_rss, result.run, test_peak, backend.device());
  if (!options.export_safetensors.empty() && rank_zero) {
    ASSIGN_OR_RETURN(ModelState state, backend.SaveState());
    if (absl::Status finite = CheckFiniteState(state); !finite.ok()) {
      return absl::OutOfRangeError(absl::StrCat("not exporting ", options.export_safetensors,
                                                ": ", finite.message()));
    }
    RETURN_IF_ERROR(ExportSafetensors(env, options.export_safetensors, state));
  }
  return result;
}

int DefaultComputeThreads(int cores, int pipeline_threads) {
  cores = std::max(1, cores);
  if (pipeline_threads <= 0) pipeline_threads = cores;
  return std::max(1, cores - std::min(cores / 4, pipeline_threads));
}

int ComputeThreadsFor(const TrainJobOptions& options) {
  if (options.backend.threads > 0) return options.backend.threads;
  return DefaultComputeThreads(UsableCores(), options.pipeline.resources.threads);
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
  c.backend.threads = ComputeThreadsFor(o);  // as many threads as the run computes on
  c.cache_dir = o.cache_dir;
  return c;
}

}  // namespace sluice
