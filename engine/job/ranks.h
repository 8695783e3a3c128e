// A training job across ranks (docs/distributed.md): which slice of every global batch this
// rank trains, and the start-up agreement that every rank runs the same job.
//
// Errors: kFailedPrecondition naming each setting that differs between ranks (a collective:
// every rank calls CheckRanksAgree at the same point). Thread safety: plain functions.
#ifndef SLUICE_ENGINE_JOB_RANKS_H_
#define SLUICE_ENGINE_JOB_RANKS_H_

#include "absl/status/status.h"
#include "engine/job/train_job.h"
#include "pipeline/pipeline.h"
#include "storage/dataset.h"

namespace sluice {

// More than one rank (options.comm is a world of several processes).
bool IsDistributed(const TrainJobOptions& options);
// Rank 0, or a single process: the rank that writes the job's outputs and speaks for it.
bool IsRankZero(const TrainJobOptions& options);
// This rank's slice of every global batch (the whole batch in a single process).
DataParallelSlice SliceOf(const TrainJobOptions& options);

// Every rank must train the same run: the identity (dataset, order, model, optimizer), the
// flags (the data path may differ between machines, its content may not), and everything that
// decides when the ranks meet in a collective, or one rank would wait forever for the others.
// `test` is the test split (null: none). A no-op in a single process.
absl::Status CheckRanksAgree(const TrainJobOptions& options, const KeyValues& identity,
                             const Dataset* test);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_RANKS_H_
