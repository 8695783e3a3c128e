#include "engine/trainer.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace sluice {

namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
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
    return absl::InvalidArgumentError(absl::StrCat(
        "InMemoryBatchSource: ", images_.size(), " image bytes for ", labels_.size(),
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
  view.format = H2DFormat::kU8;
  view.size = static_cast<uint32_t>(size);
  view.features = static_cast<uint32_t>(features_);
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
    return absl::OutOfRangeError(absl::StrCat(
        "training diverged before the checkpoint at epoch ", epoch + 1, " step ", step_in_epoch,
        " (optimizer step ", checkpoint.state.optimizer_steps, "): ", finite.message(),
        "; the previous checkpoint is kept; lower --lr"));
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

absl::StatusOr<TrainResult> Trainer::Run() {
  using Clock = std::chrono::steady_clock;
  const auto run_start = Clock::now();
  TrainResult result;
  const bool checkpoints = !options_.checkpoint_path.empty();
  const bool distributed = options_.comm != nullptr && options_.comm->is_distributed();
  // Whether any rank was asked to stop: every rank must stop after the same step, or the others
  // would wait forever in the next exchange.
  auto stop_agreed = [&](int64_t steps) -> absl::StatusOr<bool> {
    if (options_.stop_requested == nullptr) return false;
    int64_t stop = options_.stop_requested->load(std::memory_order_relaxed) ? 1 : 0;
    if (!distributed) return stop != 0;
    if (steps % kStopPollSteps != 0) return false;
    RETURN_IF_ERROR(options_.comm->AllReduceSum(&stop, 1));
    return stop != 0;
  };
  int64_t steps_this_process = 0;
  uint64_t step = start_step_;
  uint64_t samples_in_epoch = start_samples_in_epoch_;
  for (uint64_t epoch = start_epoch_; epoch < options_.epochs;
       ++epoch, step = 0, samples_in_epoch = 0) {
    const uint64_t first_step = step;
    RETURN_IF_ERROR(train_->Seek(epoch, step));
    EpochSummary summary;
    summary.epoch = epoch;
    double epoch_loss_sum = 0;
    int64_t epoch_correct = 0;
    auto take_loss = [&]() -> absl::StatusOr<LossStats> {
      ASSIGN_OR_RETURN(LossStats loss, backend_->TakeLoss());
      if (distributed) {  // the sums over every rank's samples
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
            epoch + 1, step, optimizer_steps_, loss.samples, loss.mean_loss));
      }
      epoch_loss_sum += loss.mean_loss * loss.samples;
      epoch_correct += loss.correct;
      summary.train_samples += loss.samples;
      return loss;
    };
    const auto epoch_start = Clock::now();
    double checkpoint_seconds = 0;
    auto interval_start = epoch_start;
    int64_t interval_samples = 0;
    while (true) {
      ASSIGN_OR_RETURN(std::optional<BatchView> batch, train_->Next());
      if (!batch) break;
      const float lr = LearningRateAt(options_.optimizer, optimizer_steps_);
      absl::Status status = backend_->TrainStep(*batch, lr);
      train_->Release(*batch);
      RETURN_IF_ERROR(status);
      ++optimizer_steps_;
      ++step;
      ++steps_this_process;
      // Positions count the whole global batch, the same on every rank and world size.
      const uint32_t step_samples = distributed ? batch->global_size : batch->size;
      result.samples += batch->size;
      samples_in_epoch += step_samples;
      samples_total_ += step_samples;
      interval_samples += step_samples;
      if (options_.progress_every_steps > 0 && options_.on_progress &&
          optimizer_steps_ % options_.progress_every_steps == 0) {
        ASSIGN_OR_RETURN(LossStats loss, take_loss());
        const auto now = Clock::now();
        TrainProgress progress;
        progress.epoch = epoch;
        progress.step_in_epoch = step;
        progress.batches_per_epoch = train_->batches_per_epoch();
        progress.optimizer_steps = optimizer_steps_;
        progress.loss = loss.mean_loss;
        progress.samples_per_second =
            interval_samples / std::chrono::duration<double>(now - interval_start).count();
        progress.lr = lr;
        options_.on_progress(progress);
        interval_start = now;
        interval_samples = 0;
      }
      if (checkpoints && options_.checkpoint_every_steps > 0 &&
          optimizer_steps_ % options_.checkpoint_every_steps == 0) {
        const auto t0 = Clock::now();
        RETURN_IF_ERROR(SaveCheckpoint(epoch, step, samples_in_epoch));
        checkpoint_seconds += SecondsSince(t0);
      }
      ASSIGN_OR_RETURN(const bool stop, stop_agreed(steps_this_process));
      if (stop) {
        RETURN_IF_ERROR(take_loss().status());  // also synchronizes with the device
        result.train_seconds += SecondsSince(epoch_start) - checkpoint_seconds;
        if (checkpoints) RETURN_IF_ERROR(SaveCheckpoint(epoch, step));
        result.interrupted = true;
        result.stopped_epoch = epoch;
        result.stopped_step = step;
        result.optimizer_steps = optimizer_steps_;
        result.seconds = SecondsSince(run_start);
        return result;
      }
      if (options_.stop_after_steps >= 0 && steps_this_process >= options_.stop_after_steps) {
        RETURN_IF_ERROR(backend_->Synchronize());
        result.train_seconds += SecondsSince(epoch_start) - checkpoint_seconds;
        result.stopped_early = true;
        result.optimizer_steps = optimizer_steps_;
        result.seconds = SecondsSince(run_start);
        return result;
      }
    }
    RETURN_IF_ERROR(take_loss().status());  // also synchronizes with the device
    if (options_.check) RETURN_IF_ERROR(options_.check());
    if (first_step == 0 && summary.train_samples == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "epoch ", epoch + 1, " trained 0 samples (every batch was empty or skipped)"));
    }
    summary.seconds = SecondsSince(epoch_start) - checkpoint_seconds;
    result.train_seconds += summary.seconds;
    if (summary.train_samples > 0) {
      summary.train_loss = epoch_loss_sum / summary.train_samples;
      summary.train_accuracy = static_cast<double>(epoch_correct) / summary.train_samples;
      summary.samples_per_second = summary.train_samples / summary.seconds;
    }
    if (test_ != nullptr) {
      ASSIGN_OR_RETURN(summary.test, Evaluate(backend_, test_, options_.comm));
    }
    if (options_.on_epoch_end) options_.on_epoch_end(summary);
    result.epochs.push_back(summary);
  }
  if (checkpoints) RETURN_IF_ERROR(SaveCheckpoint(options_.epochs, 0));
  result.optimizer_steps = optimizer_steps_;
  result.seconds = SecondsSince(run_start);
  return result;
}

}  // namespace sluice
