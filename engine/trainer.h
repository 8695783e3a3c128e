// Trainer: the training loop of sluice-train, independent of where batches come from.
//
//   for each epoch: source.Seek(epoch, step); while (batch = source.Next()):
//       backend.TrainStep(batch, LearningRateAt(optimizer, optimizer_steps)); source.Release(batch)
//       progress every N steps; checkpoint every N optimizer steps
//     evaluate on the test source; report the epoch
//   checkpoint at the end
//
// Resume: Trainer::Resume(checkpoint) loads the model and optimizer state into the backend and
// makes Run() start at the checkpoint's (epoch, step_in_epoch); the batch source is asked to
// Seek there, so it computes its position instead of replaying the epoch. On the CPU backend a
// resumed run ends with bitwise the same weights as an uninterrupted one.
//
// Ownership: the Trainer borrows the backend, the sources and the Env; they must outlive it.
// Errors: the first error of a source, the backend or a checkpoint write ends Run() with that
// status (a failed checkpoint write leaves the previous checkpoint intact). Divergence is an
// error: a non-finite loss (read at every progress report and epoch end) or a non-finite weight
// (checked before every checkpoint) ends Run() with kOutOfRange naming the epoch and step, and
// no checkpoint is written from then on. An epoch that starts at its first batch and trains
// no sample is kFailedPrecondition.
// Thread safety: Run() is called from one thread; callbacks run on that thread.
#ifndef SLUICE_ENGINE_TRAINER_H_
#define SLUICE_ENGINE_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/dist/communicator.h"
#include "pipeline/batch.h"

namespace sluice {

// Where the Trainer gets batches. The pipeline adapts to this; InMemoryBatchSource below is the
// simplest implementation.
// Thread safety: called from the training thread only.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Positions the source before batch `step` of `epoch` (0-based). Called at the start of every
  // epoch (step 0) and once on resume (the checkpoint's step). A step at or past the end of the
  // epoch makes the next Next() return nullopt.
  virtual absl::Status Seek(uint64_t epoch, uint64_t step) = 0;
  // The next batch of the current epoch, or nullopt at its end. The view's memory stays valid
  // until Release(view).
  virtual absl::StatusOr<std::optional<BatchView>> Next() = 0;
  // Called once per batch after Backend::TrainStep/Evaluate returned. For device batches the
  // source must not reuse the memory before the compute stream is done with it (record an
  // event on Backend::compute_stream()); host batches may be reused at once.
  virtual void Release(const BatchView& batch) = 0;
  // Batches per epoch when known (progress, cosine schedules), else 0.
  virtual uint64_t batches_per_epoch() const = 0;
  // The source's settings and position for checkpoints (shuffle, seed, window, ...); opaque to
  // the engine and stored in the checkpoint's pipeline section.
  virtual KeyValues Describe() const { return {}; }
  // The trainer is inside the span its report covers (an epoch's training) or outside it
  // (evaluation, the gap between epochs, a checkpoint): a source that works ahead counts the
  // work it does outside (Pipeline::SetConsumerInSpan).
  virtual void NoteSpan(bool in_span) {}
};

// Batches of u8 images and int32 labels held in memory, in order (no shuffle): for tests,
// benchmarks and IDX files loaded whole.
class InMemoryBatchSource : public BatchSource {
 public:
  // `images` holds labels.size() samples of `features` bytes each. With `drop_last`, a final
  // batch shorter than `batch_size` is skipped (as DataLoader(drop_last=True)).
  InMemoryBatchSource(std::vector<uint8_t> images, std::vector<int32_t> labels, int features,
                      int batch_size, bool drop_last);
  absl::Status Seek(uint64_t epoch, uint64_t step) override;
  absl::StatusOr<std::optional<BatchView>> Next() override;
  void Release(const BatchView&) override {}
  uint64_t batches_per_epoch() const override;
  KeyValues Describe() const override;

 private:
  std::vector<uint8_t> images_;
  std::vector<int32_t> labels_;
  int features_;
  int batch_size_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  uint64_t next_step_ = 0;
};

struct TrainProgress {
  uint64_t epoch = 0;
  uint64_t step_in_epoch = 0;      // batches done in this epoch
  uint64_t batches_per_epoch = 0;  // 0 when the source does not know
  int64_t optimizer_steps = 0;
  double loss = 0;                // mean training loss since the previous report
  double samples_per_second = 0;  // since the previous report
  float lr = 0;
};

struct EpochSummary {
  uint64_t epoch = 0;
  double train_loss = 0;  // mean over the epoch's steps run in this process
  double train_accuracy = 0;
  int64_t train_samples = 0;
  std::optional<EvalStats> test;  // when a test source was given
  double seconds = 0;             // training time of the epoch, without evaluation
  double samples_per_second = 0;
};

struct TrainResult {
  std::vector<EpochSummary> epochs;
  int64_t samples = 0;  // trained in this process
  // Trained in this run by every rank together: the epochs' train_samples, and those of an
  // epoch a stop ended before its end (which has no EpochSummary).
  int64_t job_samples = 0;
  int64_t optimizer_steps = 0;  // in total, including before a resume
  double train_seconds = 0;     // training only, without evaluation and checkpoints
  double seconds = 0;           // wall time of Run()
  bool stopped_early = false;   // TrainerOptions::stop_after_steps ended the run
  // TrainerOptions::stop_requested ended the run after the step at (stopped_epoch,
  // stopped_step); the checkpoint, when checkpoints are on, was written there.
  bool interrupted = false;
  uint64_t stopped_epoch = 0;
  uint64_t stopped_step = 0;
};

struct TrainerOptions {
  uint64_t epochs = 10;
  OptimizerConfig optimizer;           // its schedule gives each step's learning rate
  uint64_t seed = 0;                   // recorded in checkpoints
  Env* env = nullptr;                  // for checkpoints; Env::Default() when null
  std::string checkpoint_path;         // empty: no checkpoints
  int64_t checkpoint_every_steps = 0;  // also every this many optimizer steps (0: only at the end)
  KeyValues run_config;                // recorded in checkpoints (the flags)
  KeyValues identity;                  // recorded in checkpoints: what a resume must match
  // Called after each epoch's training (before its evaluation) and before every checkpoint; a
  // non-OK status ends Run() with it and nothing more is written (e.g. the corrupt-frame limit).
  std::function<absl::Status()> check;
  int64_t progress_every_steps = 100;
  std::function<void(const TrainProgress&)> on_progress;
  std::function<void(const EpochSummary&)> on_epoch_end;
  // For tests of interruption: return after this many optimizer steps in this process, without
  // the final checkpoint, as if the process had been killed (-1: never).
  int64_t stop_after_steps = -1;
  // Polled between steps (e.g. set by a SIGINT handler): when true, Run() finishes the current
  // step, writes a checkpoint at its position (when checkpoints are on) and returns with
  // TrainResult::interrupted. Null: never. Must outlive Run().
  const std::atomic<bool>* stop_requested = nullptr;
  // Set to true by Run() once the stop is agreed (on every rank of a data-parallel run, also
  // those that got no signal): what a simulated device watches to skip its modelled time
  // (device::SimOptions). Null: not set. Must outlive Run().
  std::atomic<bool>* stop_agreed = nullptr;
  // Data-parallel runs (docs/distributed.md): the ranks, for the control collectives (loss and
  // evaluation sums, the agreement to stop). Borrowed; null or a world of one: a single
  // process. Every rank runs the same steps; only rank 0 writes checkpoints; losses, sample
  // counts and evaluations are sums over the ranks; a stop request seen by any rank stops every
  // rank after the same step (agreed every kStopPollSteps steps).
  dist::Communicator* comm = nullptr;
};

// Steps between two agreements on a stop request in a data-parallel run.
inline constexpr int64_t kStopPollSteps = 8;

class Trainer {
 public:
  // `test` may be null (no evaluation).
  Trainer(Backend* backend, BatchSource* train, BatchSource* test, TrainerOptions options);

  // Loads `checkpoint` into the backend and makes Run() continue from its position.
  // kInvalidArgument when it does not fit the backend's model or optimizer.
  absl::Status Resume(const Checkpoint& checkpoint);

  absl::StatusOr<TrainResult> Run();

  // Writes a checkpoint of the backend's current state at (epoch, step_in_epoch), after
  // `samples_in_epoch` samples of that epoch. kOutOfRange (and nothing written) when a weight
  // or optimizer state is not finite.
  absl::Status SaveCheckpoint(uint64_t epoch, uint64_t step_in_epoch,
                              uint64_t samples_in_epoch = 0);

  // Forward passes over the whole of `source` (epoch 0); with a distributed `comm`, each rank
  // evaluates its share and the sums are over every rank.
  static absl::StatusOr<EvalStats> Evaluate(Backend* backend, BatchSource* source,
                                            dist::Communicator* comm = nullptr);

 private:
  struct RunState;    // Run()'s result so far and its clock
  struct EpochState;  // one epoch's position, loss sums and clocks

  bool distributed() const;
  // Trains the rest of the epoch. True when the run ended inside it (a stop request or
  // stop_after_steps); `run.result` says which.
  absl::StatusOr<bool> TrainEpoch(EpochState& epoch, RunState& run);
  // Counts a trained batch in the position and the sample totals.
  void CountStep(const BatchView& batch, EpochState& epoch, RunState& run);
  // The loss since the last call, summed over the ranks and added to the epoch's sums;
  // kOutOfRange when it is not finite.
  absl::StatusOr<LossStats> TakeLoss(EpochState& epoch);
  absl::Status ReportProgressIfDue(EpochState& epoch, float lr);
  absl::Status CheckpointIfDue(EpochState& epoch);
  // Whether any rank was asked to stop (agreed every kStopPollSteps in a distributed run).
  absl::StatusOr<bool> StopAgreed(int64_t steps_this_process);
  // Ends the run after the current step: its loss taken, a checkpoint at its position.
  absl::Status StopOnRequest(EpochState& epoch, RunState& run);
  // After the epoch's last batch: its summary, the evaluation and on_epoch_end.
  absl::Status FinishEpoch(EpochState& epoch, TrainResult& result);

  Backend* backend_;
  BatchSource* train_;
  BatchSource* test_;
  TrainerOptions options_;
  uint64_t start_epoch_ = 0;
  uint64_t start_step_ = 0;
  uint64_t start_samples_in_epoch_ = 0;
  uint64_t samples_total_ = 0;  // in the whole run, including before a resume
  int64_t optimizer_steps_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_TRAINER_H_
