#include "engine/trainer.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace sluice {

namespace {
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

InMemoryBatchSource::InMemoryBatchSource(std::vector<uint8_t> images, std::vector<int32_t> labels,
                                         int features, int batch_size, bool drop_last)
    : images_(std::move(images)),
      labels_(std::move(labels)),
      features_(features),
      batch_size_(batch_size),
      drop_last_(drop_last) {}

uint64_t InMemoryBatchSource::batches_per_epoch() const {
  const uint64_t n = labels_.size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

absl::Status InMemoryBatchSource::Seek(uint64_t epoch, uint64_t step) {
  if (images_.size() != labels_.size() * static_cast<size_t>(features_) || batch_size_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InMemoryBatchSource: ", images_.size(), " image bytes for ", labels_.size(),
                     " labels of ", features_, " features, batch size ", batch_size_));
  }
  epoch_ = epoch;
  next_step_ = step;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<BatchView>> InMemoryBatchSource::Next() {
  if (next_step_ >= batches_per_epoch()) return std::optional<BatchView>();
  const uint64_t first = next_step_ * batch_size_;
  const uint64_t size = std::min<uint64_t>(batch_size_, labels_.size() - first);
  BatchView view;
  view.samples = images_.data() + first * features_;
  view.labels = labels_.data() + first;
  // Unshaped u8 vectors: one channel of 1 x features.
  view.sample = SampleSpec{.dtype = ElementType::kU8,
                           .channels = 1,
                           .height = 1,
                           .width = static_cast<uint32_t>(features_)};
  view.size = static_cast<uint32_t>(size);
  view.epoch = epoch_;
  view.step = next_step_++;
  return std::optional<BatchView>(view);
}

KeyValues InMemoryBatchSource::Describe() const {
  return {{"source", "memory"},
          {"samples", absl::StrCat(labels_.size())},
          {"batch_size", absl::StrCat(batch_size_)},
          {"drop_last", drop_last_ ? "1" : "0"},
          {"shuffle", "0"}};
}

Trainer::Trainer(Backend* backend, BatchSource* train, BatchSource* test, TrainerOptions options)
    : backend_(backend), train_(train), test_(test), options_(std::move(options)) {
  if (options_.env == nullptr) options_.env = Env::Default();
}

absl::Status Trainer::Resume(const Checkpoint& checkpoint) {
  RETURN_IF_ERROR(backend_->LoadState(checkpoint.state));
  start_epoch_ = checkpoint.epoch;
  start_step_ = checkpoint.step_in_epoch;
  start_samples_in_epoch_ = checkpoint.samples_in_epoch;
  samples_total_ = checkpoint.samples_total;
  optimizer_steps_ = checkpoint.state.optimizer_steps;
  return absl::OkStatus();
}

absl::Status Trainer::SaveCheckpoint(uint64_t epoch, uint64_t step_in_epoch,
                                     uint64_t samples_in_epoch) {
  if (options_.check) RETURN_IF_ERROR(options_.check());
  // Every rank holds the same weights after the step's exchange: rank 0 writes them.
  if (options_.comm != nullptr && options_.comm->rank() != 0) return absl::OkStatus();
  // Device -> host, then host -> disk.
  RETURN_IF_ERROR(backend_->Synchronize());
  Checkpoint checkpoint;
  ASSIGN_OR_RETURN(checkpoint.state, backend_->SaveState());
  if (absl::Status finite = CheckFiniteState(checkpoint.state); !finite.ok()) {
    return absl::OutOfRangeError(
        absl::StrCat("training diverged before the checkpoint at epoch ", epoch + 1, " step ",
                     step_in_epoch, " (optimizer step ", checkpoint.state.optimizer_steps,
                     "): ", finite.message(), "; the previous checkpoint is kept; lower --lr"));
  }
  checkpoint.epoch = epoch;
  checkpoint.step_in_epoch = step_in_epoch;
  checkpoint.seed = options_.seed;
  checkpoint.samples_in_epoch = samples_in_epoch;
  checkpoint.samples_total = samples_total_;
  checkpoint.pipeline_position = train_->Describe();
  checkpoint.run_config = options_.run_config;
  checkpoint.identity = options_.identity;
  return WriteCheckpoint(options_.env, options_.checkpoint_path, checkpoint);
}

absl::StatusOr<EvalStats> Trainer::Evaluate(Backend* backend, BatchSource* source,
                                            dist::Communicator* comm) {
  EvalStats stats;
  RETURN_IF_ERROR(source->Seek(0, 0));
  while (true) {
    ASSIGN_OR_RETURN(std::optional<BatchView> batch, source->Next());
    if (!batch) break;
    absl::Status status = backend->Evaluate(*batch, &stats);
    source->Release(*batch);
    RETURN_IF_ERROR(status);
  }
  RETURN_IF_ERROR(backend->Synchronize());
  if (comm != nullptr && comm->is_distributed()) {
    double sums[3] = {stats.loss_sum, static_cast<double>(stats.samples),
                      static_cast<double>(stats.correct)};
    RETURN_IF_ERROR(comm->AllReduceSum(sums, 3));
    stats.loss_sum = sums[0];
    stats.samples = static_cast<int64_t>(sums[1]);
    stats.correct = static_cast<int64_t>(sums[2]);
  }
  return stats;
}

struct Trainer::RunState {
  Clock::time_point start = Clock::now();
  TrainResult result;
  int64_t steps_this_process = 0;
};

struct Trainer::EpochState {
  EpochState(uint64_t epoch_index, uint64_t start_step, uint64_t start_samples)
      : epoch(epoch_index),
        first_step(start_step),
        step(start_step),
        samples_in_epoch(start_samples) {
    summary.epoch = epoch_index;
  }
  // Training time so far, without the checkpoints written in between.
  double TrainSeconds() const { return SecondsSince(start) - checkpoint_seconds; }

  const uint64_t epoch;
  const uint64_t first_step;  // where the epoch started (a resume's step, else 0)
  uint64_t step;              // batches of the epoch done
  uint64_t samples_in_epoch;  // global samples of the epoch done
  EpochSummary summary;
  double loss_sum = 0;
  int64_t correct = 0;
  const Clock::time_point start = Clock::now();
  double checkpoint_seconds = 0;
  Clock::time_point interval_start = start;  // of the progress report's interval
  int64_t interval_samples = 0;
};

bool Trainer::distributed() const {
  return options_.comm != nullptr && options_.comm->is_distributed();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  RunState run;
  for (uint64_t epoch = start_epoch_; epoch < options_.epochs; ++epoch) {
    // A resumed run continues its first epoch at the checkpoint's position.
    const bool resumed = epoch == start_epoch_;
    const uint64_t first_step = resumed ? start_step_ : 0;
    RETURN_IF_ERROR(train_->Seek(epoch, first_step));
    train_->NoteSpan(true);  // the epoch's training time starts with its state
    EpochState state(epoch, first_step, resumed ? start_samples_in_epoch_ : 0);
    ASSIGN_OR_RETURN(const bool run_ended, TrainEpoch(state, run));
    if (run_ended) break;
    RETURN_IF_ERROR(FinishEpoch(state, run.result));
  }
  // A stop request wrote its own checkpoint; stop_after_steps writes none (as if killed).
  const bool ended_early = run.result.interrupted || run.result.stopped_early;
  if (!ended_early && !options_.checkpoint_path.empty()) {
    RETURN_IF_ERROR(SaveCheckpoint(options_.epochs, 0));
  }
  run.result.optimizer_steps = optimizer_steps_;
  run.result.seconds = SecondsSince(run.start);
  return run.result;
}

absl::StatusOr<bool> Trainer::TrainEpoch(EpochState& epoch, RunState& run) {
  while (true) {
    // Checked before the next batch is asked for, except after an epoch's last step: that
    // epoch ends first (its metrics line was dropped when the stop came before its end).
    if (options_.stop_after_steps >= 0 && run.steps_this_process >= options_.stop_after_steps &&
        (train_->batches_per_epoch() == 0 || epoch.step < train_->batches_per_epoch())) {
      // Every rank stops after the same step, so the sum over the ranks is agreed here too.
      RETURN_IF_ERROR(TakeLoss(epoch).status());  // also synchronizes with the device
      run.result.job_samples += epoch.summary.train_samples;
      run.result.train_seconds += epoch.TrainSeconds();
      run.result.stopped_early = true;
      return true;
    }
    ASSIGN_OR_RETURN(std::optional<BatchView> batch, train_->Next());
    if (!batch) return false;
    const float lr = LearningRateAt(options_.optimizer, optimizer_steps_);
    absl::Status status = backend_->TrainStep(*batch, lr);
    train_->Release(*batch);
    RETURN_IF_ERROR(status);
    CountStep(*batch, epoch, run);
    RETURN_IF_ERROR(ReportProgressIfDue(epoch, lr));
    RETURN_IF_ERROR(CheckpointIfDue(epoch));
    ASSIGN_OR_RETURN(const bool stop, StopAgreed(run.steps_this_process));
    if (stop) {
      RETURN_IF_ERROR(StopOnRequest(epoch, run));
      return true;
    }
  }
}

void Trainer::CountStep(const BatchView& batch, EpochState& epoch, RunState& run) {
  ++optimizer_steps_;
  dist::NoteTrainingStep(optimizer_steps_);  // named by the collective watchdog
  ++epoch.step;
  ++run.steps_this_process;
  // Positions count the whole global batch, the same on every rank and world size.
  const uint32_t step_samples = distributed() ? batch.global_size : batch.size;
  run.result.samples += batch.size;
  epoch.samples_in_epoch += step_samples;
  samples_total_ += step_samples;
  epoch.interval_samples += step_samples;
}

absl::StatusOr<LossStats> Trainer::TakeLoss(EpochState& epoch) {
  ASSIGN_OR_RETURN(LossStats loss, backend_->TakeLoss());
  if (distributed()) {  // the sums over every rank's samples
    double sums[3] = {loss.mean_loss * static_cast<double>(loss.samples),
                      static_cast<double>(loss.samples), static_cast<double>(loss.correct)};
    RETURN_IF_ERROR(options_.comm->AllReduceSum(sums, 3));
    loss.samples = static_cast<int64_t>(sums[1]);
    loss.correct = static_cast<int64_t>(sums[2]);
    loss.mean_loss = loss.samples > 0 ? sums[0] / sums[1] : 0.0;
  }
  if (loss.samples > 0 && !std::isfinite(loss.mean_loss)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "training diverged in epoch %d at step %d (optimizer step %d): the mean loss of the "
        "last %d samples is %g; nothing more was written (the last checkpoint and any "
        "export are from before); lower --lr",
        epoch.epoch + 1, epoch.step, optimizer_steps_, loss.samples, loss.mean_loss));
  }
  epoch.loss_sum += loss.mean_loss * loss.samples;
  epoch.correct += loss.correct;
  epoch.summary.train_samples += loss.samples;
  return loss;
}

absl::Status Trainer::ReportProgressIfDue(EpochState& epoch, float lr) {
  if (options_.progress_every_steps <= 0 || !options_.on_progress ||
      optimizer_steps_ % options_.progress_every_steps != 0) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(LossStats loss, TakeLoss(epoch));
  const auto now = Clock::now();
  TrainProgress progress;
  progress.epoch = epoch.epoch;
  progress.step_in_epoch = epoch.step;
  progress.batches_per_epoch = train_->batches_per_epoch();
  progress.optimizer_steps = optimizer_steps_;
  progress.loss = loss.mean_loss;
  progress.samples_per_second =
      epoch.interval_samples / std::chrono::duration<double>(now - epoch.interval_start).count();
  progress.lr = lr;
  options_.on_progress(progress);
  epoch.interval_start = now;
  epoch.interval_samples = 0;
  return absl::OkStatus();
}

absl::Status Trainer::CheckpointIfDue(EpochState& epoch) {
  if (options_.checkpoint_path.empty() || options_.checkpoint_every_steps <= 0 ||
      optimizer_steps_ % options_.checkpoint_every_steps != 0) {
    return absl::OkStatus();
  }
  const auto t0 = Clock::now();
  train_->NoteSpan(false);  // not training time (EpochState::TrainSeconds)
  absl::Status saved = SaveCheckpoint(epoch.epoch, epoch.step, epoch.samples_in_epoch);
  train_->NoteSpan(true);
  RETURN_IF_ERROR(saved);
  epoch.checkpoint_seconds += SecondsSince(t0);
  return absl::OkStatus();
}

// Every rank must stop after the same step, or the others would wait forever in the next
// exchange.
absl::StatusOr<bool> Trainer::StopAgreed(int64_t steps_this_process) {
  if (options_.stop_requested == nullptr) return false;
  int64_t stop = options_.stop_requested->load(std::memory_order_relaxed) ? 1 : 0;
  if (distributed()) {
    if (steps_this_process % kStopPollSteps != 0) return false;
    RETURN_IF_ERROR(options_.comm->AllReduceSum(&stop, 1));
  }
  if (stop != 0 && options_.stop_agreed != nullptr) options_.stop_agreed->store(true);
  return stop != 0;
}

absl::Status Trainer::StopOnRequest(EpochState& epoch, RunState& run) {
  RETURN_IF_ERROR(TakeLoss(epoch).status());  // also synchronizes with the device
  run.result.job_samples += epoch.summary.train_samples;
  run.result.train_seconds += epoch.TrainSeconds();
  if (!options_.checkpoint_path.empty()) RETURN_IF_ERROR(SaveCheckpoint(epoch.epoch, epoch.step));
  run.result.interrupted = true;
  run.result.stopped_epoch = epoch.epoch;
  run.result.stopped_step = epoch.step;
  return absl::OkStatus();
}

absl::Status Trainer::FinishEpoch(EpochState& epoch, TrainResult& result) {
  RETURN_IF_ERROR(TakeLoss(epoch).status());  // also synchronizes with the device
  if (options_.check) RETURN_IF_ERROR(options_.check());
  EpochSummary& summary = epoch.summary;
  if (epoch.first_step == 0 && summary.train_samples == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "epoch ", epoch.epoch + 1, " trained 0 samples (every batch was empty or skipped)"));
  }
  summary.seconds = epoch.TrainSeconds();
  train_->NoteSpan(false);  // evaluation and the next epoch's start are not training time
  result.train_seconds += summary.seconds;
  if (summary.train_samples > 0) {
    summary.train_loss = epoch.loss_sum / summary.train_samples;
    summary.train_accuracy = static_cast<double>(epoch.correct) / summary.train_samples;
    summary.samples_per_second = summary.train_samples / summary.seconds;
  }
  if (test_ != nullptr) {
    ASSIGN_OR_RETURN(summary.test, Evaluate(backend_, test_, options_.comm));
  }
  if (options_.on_epoch_end) options_.on_epoch_end(summary);
  result.job_samples += summary.train_samples;
  result.epochs.push_back(summary);
  return absl::OkStatus();
}

}  // namespace sluice
