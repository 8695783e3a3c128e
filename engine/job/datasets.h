// The datasets of a training run: the train split and the test split it is evaluated on,
// opened from shards, or from IDX files sharded once into a cache.
//
// Errors: kNotFound / kDataLoss for missing or corrupt data (naming the file),
// kInvalidArgument for data the model cannot train on (naming the manifest and the shapes),
// for a --test-data without a test split, or a test split whose records differ from the
// train split's. Thread safety: plain functions; the datasets are used by one job.
#ifndef SLUICE_ENGINE_JOB_DATASETS_H_
#define SLUICE_ENGINE_JOB_DATASETS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/model.h"
#include "pipeline/pipeline.h"
#include "storage/dataset.h"

namespace sluice {

// Opens the split at `path`: a manifest, a dataset directory (split `split` or its only one),
// or a directory of IDX files (`<prefix>-images-idx3-ubyte[.gz]` + labels, MNIST naming:
// `train-*` for split train, `t10k-*` for test), which is sharded once into
// `cache_dir/<hash of the IDX files>/` and reused while the files are unchanged. An empty
// `cache_dir` is DefaultCacheDir().
absl::StatusOr<std::unique_ptr<Dataset>> OpenOrShardDataset(Env* env, const std::string& path,
                                                            const std::string& split,
                                                            const std::string& cache_dir);

// The IDX files in directory `dir` that OpenOrShardDataset may read for either split (train,
// t10k and test prefixes, raw or .gz), those that exist: a run's outputs must not replace them
// (CheckOutputsAreNotInputs, engine/job/outputs.h). Empty when `dir` is not a directory.
std::vector<std::string> IdxInputFiles(Env* env, const std::string& dir);

// Where a run's splits come from (TrainJobOptions' data, test_data, evaluate, cache_dir).
struct SplitSources {
  std::string data;
  std::string test_data;  // empty: the train split's "test" sibling, or the t10k IDX files
  bool evaluate = true;
  std::string cache_dir;
};

struct Splits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;  // null: no evaluation
  // Why `test` is null although evaluation was asked for, when a test split was found but is
  // the train split itself (the same manifest file: --data names a test split, or a folder
  // whose only split is test, and its "test sibling" is itself); else empty.
  std::string not_evaluated;
};

// Opens the train split, checks that `model` can train on it (u8 samples of the model's input
// size), and, when evaluating, the test split (null when there is none, or when it is the
// train split's manifest file: Splits::not_evaluated says so; accuracy measured on the
// training records is not a test accuracy).
// `format`: the train pipeline's batch format; the model's first layer must take its samples
// (the transforms' output, C*H*W values).
absl::StatusOr<Splits> OpenSplits(Env* env, const SplitSources& sources, const ModelConfig& model,
                                  const BatchFormat& format = {});

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_DATASETS_H_
