#include "engine/job/outputs.h"

#include "absl/strings/str_cat.h"
#include "common/json_fields.h"
#include "common/status_macros.h"
#include "engine/checkpoint.h"
#include "engine/safetensors.h"
#include "nlohmann/json.hpp"

namespace sluice {

absl::Status ProbeWritable(Env* env, const std::string& path, absl::string_view flag) {
  if (env->GetChildren(path).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", path, ": is a directory (expected a file path)"));
  }
  if (env->IsSpecialFile(path)) {
    // /dev/null, a FIFO, /dev/stdout: opened as it will be written, and nothing is created
    // beside it.
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewAppendableFile(path);
    if (file.ok()) return (*file)->Close();
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", path, ": cannot be written: ", file.status().message()));
  }
  const std::string probe = absl::StrCat(path, ".probe");
  auto file = env->NewTemporaryFile(probe);
  absl::Status status = file.status();
  if (status.ok()) status = (*file)->Close();
  if (file.ok()) {
    file->reset();
    absl::Status removed = env->DeleteFile(probe);
    if (status.ok()) status = removed;
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", path, ": cannot be written: ", status.message()));
  }
  return absl::OkStatus();
}

std::string RecordOrderPath(const TrainJobOptions& options) {
  if (options.record_order_path.empty() || options.comm == nullptr ||
      !options.comm->is_distributed()) {
    return options.record_order_path;
  }
  return absl::StrCat(options.record_order_path, ".rank", options.comm->rank());
}

absl::Status ProbeJobOutputs(Env* env, const TrainJobOptions& options) {
  // Rank 0 writes the export and the metrics; every rank its own record order.
  const bool rank_zero = options.comm == nullptr || options.comm->rank() == 0;
  if (!options.export_safetensors.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, options.export_safetensors, "export-safetensors"));
  }
  if (!options.metrics_out.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, options.metrics_out, "metrics-out"));
  }
  const std::string record_order = RecordOrderPath(options);
  if (!record_order.empty()) RETURN_IF_ERROR(ProbeWritable(env, record_order, "record-order"));
  return absl::OkStatus();
}

absl::StatusOr<MetricsLog> MetricsLog::Open(Env* env, const std::string& path, bool keep_existing) {
  MetricsLog log(env, path);
  if (env->IsSpecialFile(path)) return log;  // each line is appended as it comes
  if (keep_existing && env->FileExists(path)) {
    ASSIGN_OR_RETURN(log.text_, ReadFileToString(env, path));
  }
  // Nothing is written before the first epoch's line: a failed run leaves no empty file (the
  // start-up probe has checked that the path can be written).
  return log;
}

absl::Status MetricsLog::Append(const EpochSummary& s) {
  nlohmann::ordered_json j;
  SLUICE_JSON_SET_FIELDS(j, s, epoch, train_loss, train_accuracy, train_samples, seconds,
                         samples_per_second);
  if (s.test) {
    j["test_loss"] = s.test->samples ? s.test->loss_sum / s.test->samples : 0.0;
    j["test_accuracy"] = s.test->accuracy();
    j["test_samples"] = s.test->samples;
  }
  const std::string line = j.dump() + "\n";
  if (env_->IsSpecialFile(path_)) return WriteFileAtomically(env_, path_, line);
  text_ += line;
  return WriteFileAtomically(env_, path_, text_);
}

absl::StatusOr<std::optional<BatchView>> RecordingBatchSource::Next() {
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

absl::Status ExportWeights(Env* env, const std::string& path, Backend& backend) {
  ASSIGN_OR_RETURN(ModelState state, backend.SaveState());
  if (absl::Status finite = CheckFiniteState(state); !finite.ok()) {
    return absl::OutOfRangeError(absl::StrCat("not exporting ", path, ": ", finite.message()));
  }
  return ExportSafetensors(env, path, state);
}

}  // namespace sluice
