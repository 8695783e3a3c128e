#include "engine/job/outputs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_fields.h"
#include "common/output_target.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "engine/checkpoint.h"
#include "engine/job/datasets.h"
#include "engine/job/resume.h"
#include "engine/safetensors.h"
#include "nlohmann/json.hpp"
#include "storage/dataset_files.h"

namespace sluice {

namespace {

// A special file (a FIFO, a device) opened once for the run. Not blocking: a FIFO with no
// reader is refused now, where waiting for one could last forever; writes then block as usual.
absl::StatusOr<std::shared_ptr<const int>> OpenSpecialForWriting(const std::string& path,
                                                                 absl::string_view flag) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 && errno == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISFIFO(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--", flag, " ", path, ": ", kNoDeviceBehind));
  }
  if (fd < 0 && errno == ENXIO) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--", flag, " ", path, ": a FIFO that no process is reading (start its reader first)"));
  }
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--", flag, " ", path, ": cannot be opened: ", std::strerror(errno)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

// Writes `data` to a special file's `fd`. SIGPIPE is blocked meanwhile (a reader that left is
// EPIPE, an error naming the path, not the end of the process), and a pending SIGPIPE this
// write raised is taken back. A write that a stop interrupts is given up: OK.
absl::Status WriteSpecial(int fd, const std::string& path, absl::string_view data,
                          const std::atomic<bool>* stop) {
  sigset_t pipe_signal, old_mask;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  int error = 0;
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      if (!data.empty() && stop != nullptr && stop->load()) error = EINTR;  // a part, then stop
      if (error != 0) break;
      continue;
    }
    if (errno == EINTR && (stop == nullptr || !stop->load())) continue;
    error = errno;
    break;
  }
  if (error == EPIPE) {
    const timespec now = {0, 0};
    ::sigtimedwait(&pipe_signal, nullptr, &now);
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (error == 0 || error == EINTR) return absl::OkStatus();  // EINTR: a stop; it ends the run
  if (error == EPIPE) {
    return absl::FailedPreconditionError(
        absl::StrCat("--metrics-out ", path, ": its reader has gone (write: broken pipe)"));
  }
  return absl::InternalError(
      absl::StrCat("--metrics-out ", path, ": write failed: ", std::strerror(error)));
}

}  // namespace

absl::Status CheckOutputsAreNotInputs(std::vector<OutputPath> outputs,
                                      const TrainJobOptions& options) {
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"metrics-out", options.metrics_out},
        {"export-safetensors", options.export_safetensors},
        {"record-order", options.record_order_path}}) {
    if (!path.empty()) outputs.push_back({flag, path});
  }
  // A special target that is a regular file in the end (`--report-json=- >> ds/x.manifest.json`:
  // stdout redirected into a file the run reads) is checked by identity against the inputs.
  std::vector<OutputPath> redirected;
  for (const OutputPath& o : outputs) {
    const std::string path = o.path == "-" ? "/dev/stdout" : o.path;
    struct stat st;
    if (!o.path.empty() && (o.path == "-" || Env::Default()->IsSpecialFile(o.path)) &&
        ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      redirected.push_back({o.flag, path});
    }
  }
  // Special targets (/dev/null for several outputs, /dev/stdout) are appended to, never
  // replaced: they may be named more than once.
  outputs.erase(std::remove_if(outputs.begin(), outputs.end(),
                               [](const OutputPath& o) {
                                 return o.path.empty() || Env::Default()->IsSpecialFile(o.path);
                               }),
                outputs.end());
  std::vector<OutputPath> inputs;
  if (!options.resume.empty() && options.resume != "auto") {
    inputs.push_back({"resume", options.resume});
  }
  if (!options.checkpoint_dir.empty()) {
    inputs.push_back({"checkpoint-dir", CheckpointPath(options.checkpoint_dir)});
  }
  for (const auto& [flag, data] : {std::pair<const char*, const std::string&>{"data", options.data},
                                   {"test-data", options.test_data}}) {
    if (data.empty()) continue;
    for (std::string& file : IdxInputFiles(Env::Default(), data)) {
      inputs.push_back({absl::StrCat(flag, " IDX"), std::move(file)});
    }
  }
  for (const OutputPath& o : redirected) {
    const std::string what = absl::StrCat("--", o.flag, " (", Printable(o.path), ")");
    for (const OutputPath& in : inputs) {
      RETURN_IF_ERROR(
          CheckNotAnInputFile(o.path, in.path, what, absl::StrCat("the --", in.flag, " file")));
    }
    for (const std::string* data : {&options.data, &options.test_data}) {
      if (!data->empty()) RETURN_IF_ERROR(CheckNotADatasetFile(o.path, *data, what));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string out = ResolvedOutputPath(outputs[i].path);
    for (size_t j = 0; j < i; ++j) {
      if (ResolvedOutputPath(outputs[j].path) == out) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", outputs[i].flag, " and --", outputs[j].flag, " name the same file ",
                         Printable(outputs[i].path), ": one would replace the other"));
      }
    }
    // Each output is written to "<path>.tmp" and renamed over its path (Env::WriteFile): an
    // output or an input of that name would be replaced, or removed by the check at start.
    const std::string tmp = outputs[i].path + ".tmp";
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (j != i && ResolvedOutputPath(outputs[j].path) == ResolvedOutputPath(tmp)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", outputs[j].flag, " ", Printable(outputs[j].path), " is the temporary file of --",
            outputs[i].flag, " (written as ", Printable(tmp),
            ", then renamed): one would replace the other; name it otherwise"));
      }
    }
    for (const OutputPath& in : inputs) {
      RETURN_IF_ERROR(CheckNotAnInputFile(tmp, in.path,
                                          absl::StrCat("the temporary file of --", outputs[i].flag),
                                          absl::StrCat("the --", in.flag, " file")));
    }
    const std::string what = absl::StrCat("--", outputs[i].flag);
    // The checkpoint read or written, and the raw IDX files of --data and --test-data: by any
    // spelling, a hard or a symbolic link (storage/dataset_files.h).
    for (const OutputPath& in : inputs) {
      RETURN_IF_ERROR(CheckNotAnInputFile(outputs[i].path, in.path, what,
                                          absl::StrCat("the --", in.flag, " file")));
    }
    // A manifest, shard or lock of a dataset read (--data, --test-data), or another name of one.
    for (const std::string* data : {&options.data, &options.test_data}) {
      if (!data->empty()) RETURN_IF_ERROR(CheckNotADatasetFile(outputs[i].path, *data, what));
    }
    // A dataset the IDX input was sharded into, or a measured-ceilings file, in the cache.
    RETURN_IF_ERROR(CheckNotACacheFile(
        outputs[i].path, options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir, what));
  }
  return absl::OkStatus();
}

absl::Status ProbeWritable(Env* env, const std::string& path, absl::string_view flag) {
  return ProbeOutputFile(env, path, flag);
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
  if (!options.checkpoint_dir.empty() && rank_zero) {
    // The checkpoint replaces its file by a rename: anything there but a regular file (a FIFO
    // a checkpoint write would wait on) is refused before training.
    const std::string checkpoint = CheckpointPath(options.checkpoint_dir);
    struct stat st;
    if (::stat(checkpoint.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--checkpoint-dir ", Printable(options.checkpoint_dir), ": ",
                       Printable(checkpoint), " is not a regular file (remove it)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MetricsLog> MetricsLog::Open(Env* env, const std::string& path, bool keep_existing,
                                            const std::atomic<bool>* stop) {
  MetricsLog log(env, path);
  log.stop_ = stop;
  if (env->IsSpecialFile(path)) {
    ASSIGN_OR_RETURN(log.special_fd_, OpenSpecialForWriting(path, "metrics-out"));
    return log;  // each line is written as it comes
  }
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
  if (special_fd_ != nullptr) return WriteSpecial(*special_fd_, path_, line, stop_);
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
