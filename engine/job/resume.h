// Resume: the identity of a training run, and the checkpoint a run continues from.
//
// A checkpoint records the run's identity (docs/formats/checkpoint.md, "Run identity"); a
// resume must match it key by key, so a run is never continued with other data, order, model
// or optimizer. In a data-parallel run rank 0 alone reads the checkpoint and broadcasts it (or
// its error), so the other ranks need no shared file system and fail with the same message.
//
// Errors: kFailedPrecondition for a checkpoint of another run (every differing field, old and
// new, in one message), a dangling checkpoint symlink, or a checkpoint already at the last
// epoch; kInvalidArgument for a checkpoint whose model is not --layers; the checkpoint
// reader's kNotFound / kDataLoss. Thread safety: plain functions.
#ifndef SLUICE_ENGINE_JOB_RESUME_H_
#define SLUICE_ENGINE_JOB_RESUME_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/checkpoint.h"
#include "engine/job/train_job.h"
#include "storage/dataset.h"

namespace sluice {

// The checkpoint file of a checkpoint directory.
std::string CheckpointPath(const std::string& checkpoint_dir);

// What defines a run, recorded in its checkpoints; a resume must match it key by key
// (docs/formats/checkpoint.md "Run identity"). `train` is the train split.
KeyValues RunIdentity(const TrainJobOptions& options, const Dataset& train);

// The checkpoint options.resume names ("auto": the checkpoint directory's, when there is one;
// empty: none), checked to continue the run whose identity is `identity`. In a data-parallel
// run (options.comm) every rank calls this at the same point and gets rank 0's result.
absl::StatusOr<std::optional<Checkpoint>> LoadResumeCheckpoint(Env* env,
                                                               const TrainJobOptions& options,
                                                               const KeyValues& identity);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_RESUME_H_
