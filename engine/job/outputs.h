// The files a training job writes besides its checkpoints: --metrics-out (one JSON line per
// epoch), --record-order (the record ids of every trained step), --export-safetensors. Each is
// probed before the first step, so a run never trains and then loses its result; each is
// written atomically through the Env.
//
// Errors: kInvalidArgument naming the flag and the path for an output that cannot be written;
// the Env's I/O errors. Thread safety: used by the training thread only.
#ifndef SLUICE_ENGINE_JOB_OUTPUTS_H_
#define SLUICE_ENGINE_JOB_OUTPUTS_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "engine/job/train_job.h"
#include "engine/trainer.h"

namespace sluice {

// Checks, before any training, that `path` can be written (its directory exists and is writable,
// and it is not a directory) by creating and deleting the temporary the write will use,
// `path`.tmp, through the Env; a FIFO must have a reader, a socket or block device is refused,
// another special file (Env::IsSpecialFile) is checked with access(2): ProbeOutputFile
// (common/output_target.h). kInvalidArgument naming `flag` and the path otherwise.
absl::Status ProbeWritable(Env* env, const std::string& path, absl::string_view flag);

// This rank's --record-order file: the path itself, or <path>.rank<R> in a data-parallel run;
// empty when off.
std::string RecordOrderPath(const TrainJobOptions& options);

// Probes every output this rank writes: rank 0's export and metrics, every rank's record order;
// and that the checkpoint, when there is one, is a regular file (a FIFO there would block the
// first checkpoint write).
absl::Status ProbeJobOutputs(Env* env, const TrainJobOptions& options);

// An output the run would write: its flag ("report-json") and path.
struct OutputPath {
  std::string flag;
  std::string path;
};
// `outputs` plus the job's own (--metrics-out, --export-safetensors, --record-order) must not
// name the same file twice, nor a file the run reads: the checkpoint it resumes from or writes,
// or a manifest, shard or lock of the dataset's directory (an output there replaced the
// manifest or a shard, and the run still exited 0). kInvalidArgument naming both.
absl::Status CheckOutputsAreNotInputs(std::vector<OutputPath> outputs,
                                      const TrainJobOptions& options);

// --metrics-out: one JSON line per epoch. The whole file is rewritten atomically after each
// epoch (it is small), so a crash never leaves a torn line. A special file (a FIFO, a device,
// /dev/stdout) is opened once, by Open, and each line is written to it as it comes: a FIFO with
// no reader is refused at once (kFailedPrecondition, not a wait for one), and a reader that
// leaves mid-run is a write error naming the path (EPIPE; never SIGPIPE).
class MetricsLog {
 public:
  // `keep_existing`: a resumed run continues the file of the interrupted one. `stop`: a stop
  // request (borrowed, may be null); a write to a special file that a stop interrupts is
  // given up (the line is lost, the run ends as a stop, not with a write error).
  static absl::StatusOr<MetricsLog> Open(Env* env, const std::string& path, bool keep_existing,
                                         const std::atomic<bool>* stop = nullptr);
  absl::Status Append(const EpochSummary& summary);

 private:
  MetricsLog(Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  Env* env_;
  std::string path_;
  std::string text_;
  std::shared_ptr<const int> special_fd_;  // the special file's descriptor, open for the run
  const std::atomic<bool>* stop_ = nullptr;
};

// --record-order: passes batches through and notes the record ids of each one
// ("epoch step id id ...", one line per step).
class RecordingBatchSource final : public BatchSource {
 public:
  explicit RecordingBatchSource(BatchSource* inner) : inner_(inner) {}
  absl::Status Seek(uint64_t epoch, uint64_t step) override { return inner_->Seek(epoch, step); }
  absl::StatusOr<std::optional<BatchView>> Next() override;
  void Release(const BatchView& batch) override { inner_->Release(batch); }
  uint64_t batches_per_epoch() const override { return inner_->batches_per_epoch(); }
  KeyValues Describe() const override { return inner_->Describe(); }
  void NoteSpan(bool in_span) override { inner_->NoteSpan(in_span); }
  const std::string& text() const { return text_; }

 private:
  BatchSource* inner_;
  std::string text_;
};

// --export-safetensors: the trained weights, refused when any is not finite (kOutOfRange).
absl::Status ExportWeights(Env* env, const std::string& path, Backend& backend);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_OUTPUTS_H_
