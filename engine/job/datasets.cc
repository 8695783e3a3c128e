#include "engine/job/datasets.h"

#include <sys/stat.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "pipeline/batch_format.h"
#include "storage/dataset_writer.h"
#include "storage/file_identity.h"
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
  return absl::NotFoundError(
      absl::StrCat(dir, ": no ", ManifestFileName(split), " and no IDX files for split \"", split,
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
  ASSIGN_OR_RETURN(RecordArrays records, ParseIdxPair(images, files.first, labels, files.second));
  WriteDatasetOptions options;
  absl::StatusOr<uint32_t> classes = CheckLabels(records, std::nullopt);
  if (!classes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(files.second, ": ", classes.status().message()));
  }
  options.num_classes = *classes;
  options.sources = {{"images", BaseName(files.first), images.size(), Xxh3(images)},
                     {"labels", BaseName(files.second), labels.size(), Xxh3(labels)}};
  RETURN_IF_ERROR(WriteDataset(env, out, split, records, options).status());
  return Dataset::Open(env, manifest, split);
}

}  // namespace

std::vector<std::string> IdxInputFiles(Env* env, const std::string& dir) {
  std::vector<std::string> files;  // none when `dir` is a file: no name under it exists
  for (const char* prefix : {"train", "t10k", "test"}) {
    for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
      for (const char* suffix : {".gz", ""}) {
        std::string file = JoinPath(dir, absl::StrCat(prefix, kind, suffix));
        if (env->FileExists(file)) files.push_back(std::move(file));
      }
    }
  }
  return files;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenOrShardDataset(Env* env, const std::string& path,
                                                            const std::string& split,
                                                            const std::string& cache_dir) {
  if (!env->FileExists(path)) {
    // Say why when it is not simply missing ("File name too long", "Permission denied").
    if (absl::StatusOr<uint64_t> size = env->GetFileSize(path);
        !size.ok() && size.status().code() != absl::StatusCode::kNotFound) {
      return size.status();
    }
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  auto dataset = Dataset::Open(env, path, split);
  if (dataset.ok() || dataset.status().code() != absl::StatusCode::kNotFound ||
      absl::EndsWith(path, kManifestSuffix)) {
    return dataset;
  }
  // A directory without manifests: maybe IDX files.
  auto sharded =
      ShardIdxIntoCache(env, path, split, cache_dir.empty() ? DefaultCacheDir() : cache_dir);
  if (sharded.status().code() == absl::StatusCode::kNotFound) return dataset.status();
  return sharded;
}

namespace {

// A split whose labels reach past the model's outputs fails at its first such label, steps into
// the run; its declared class count (label.num_classes) lets the run refuse it at start.
absl::Status CheckClassCount(const Dataset& split, const ModelConfig& model) {
  const std::optional<uint32_t>& classes = split.manifest().num_classes;
  if (classes && *classes > static_cast<uint32_t>(model.layers.back())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layers: the last layer has %d outputs but %s declares %u classes (label.num_classes); "
        "end --layers with at least %u",
        model.layers.back(), split.manifest_path(), *classes, *classes));
  }
  return absl::OkStatus();
}

// u8 images of any channel count and shape; the first layer takes the batch's sample (after
// --transforms, when given).
absl::Status CheckTrainable(const Dataset& train, const ModelConfig& model,
                            const BatchFormat& format) {
  const RecordSpec& spec = train.spec();
  if (spec.sample_dtype != SampleDType::kU8) {
    return absl::InvalidArgumentError(
        absl::StrCat(train.manifest_path(), ": samples are ", SampleDTypeName(spec.sample_dtype),
                     "; sluice-train trains on u8 images (as MNIST)"));
  }
  ASSIGN_OR_RETURN(
      const ResolvedBatchFormat batch,
      ResolveBatchFormat(spec, format, SettingNames::kFlags, train.manifest().image_bound));
  if (batch.chain != nullptr && batch.chain->output_spec().values() > kMaxLayerSize) {
    // No --layers can take it: suggesting its size would name a layer --layers refuses.
    const SampleSpec& s = batch.chain->output_spec();
    return absl::InvalidArgumentError(absl::StrFormat(
        "--transforms: the samples after the transforms are %s %ux%ux%u (%u values), too large "
        "for any model (a layer takes at most %u values, 2^30); make them smaller (a smaller "
        "Resize or crop)",
        ElementTypeName(s.dtype), s.channels, s.height, s.width, s.values(), kMaxLayerSize));
  }
  if (batch.chain != nullptr &&
      static_cast<uint64_t>(model.layers.front()) != batch.sample.values()) {
    const SampleSpec& s = batch.chain->output_spec();
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layers: the first layer takes %d values, the samples after --transforms are %s %ux%ux%u "
        "(%u); start --layers with %u",
        model.layers.front(), ElementTypeName(s.dtype), s.channels, s.height, s.width, s.values(),
        s.values()));
  }
  if (batch.chain == nullptr && model.layers.front() != static_cast<int>(spec.sample_values())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--layers: the first layer has %d inputs but %s holds samples of %d values (%ux%ux%u, "
        "C x H x W); start --layers with %d",
        model.layers.front(), train.manifest_path(), spec.sample_values(), spec.channels,
        spec.height, spec.width, spec.sample_values()));
  }
  return CheckClassCount(train, model);
}

// A split's records for messages: "u8 samples 8x8x3 (H x W x C), u8 labels", or "jpeg
// images, u8 labels" for an encoded split.
std::string RecordsText(const RecordSpec& s) {
  if (s.encoded()) {
    return absl::StrCat(SampleEncodingName(s.encoding), " images, ", LabelDTypeName(s.label_dtype),
                        " labels");
  }
  return absl::StrCat(SampleDTypeName(s.sample_dtype), " samples ", s.height, "x", s.width, "x",
                      s.channels, " (H x W x C), ", LabelDTypeName(s.label_dtype), " labels");
}

// Whether two splits are one manifest file (any spelling, a link: the same device and inode).
bool SameManifest(const Dataset& a, const Dataset& b) {
  struct stat sa, sb;
  return ::stat(a.manifest_path().c_str(), &sa) == 0 &&
         ::stat(b.manifest_path().c_str(), &sb) == 0 && IdentityOf(sa) == IdentityOf(sb);
}

// The test split: --test-data (a directory's "test" split, else its "val" split), else the
// train split's "test" sibling, else its "val" sibling (an image folder's train/ and val/,
// sharded as they are named), else (IDX input) the directory's t10k files; null when there is
// none.
absl::StatusOr<std::unique_ptr<Dataset>> OpenTestSplit(Env* env, const SplitSources& options,
                                                       const Dataset& train) {
  std::unique_ptr<Dataset> test;
  if (!options.test_data.empty()) {
    std::string path = options.test_data;
    if (!absl::EndsWith(path, kManifestSuffix) &&
        !env->FileExists(JoinPath(path, ManifestFileName("test"))) &&
        env->FileExists(JoinPath(path, ManifestFileName("val")))) {
      path = JoinPath(path, ManifestFileName("val"));
    }
    ASSIGN_OR_RETURN(test, OpenOrShardDataset(env, path, "test", options.cache_dir));
    // A directory's only split is opened when it has no test split: refuse it when that split
    // is a train split (evaluating on training data is not what --test-data asked for).
    if (!absl::EndsWith(options.test_data, kManifestSuffix) &&
        BaseName(test->manifest_path()) == ManifestFileName("train")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--test-data ", options.test_data, ": no test split (expected ",
                       JoinPath(options.test_data, ManifestFileName("test")),
                       "; the only split there is ", test->manifest_path(), ")"));
    }
  } else if (auto sibling = train.SiblingManifest("test"); sibling.ok()) {
    ASSIGN_OR_RETURN(test, Dataset::Open(env, *sibling, "test"));
  } else if (auto val = train.SiblingManifest("val"); val.ok()) {
    ASSIGN_OR_RETURN(test, Dataset::Open(env, *val, "val"));
  } else if (!absl::EndsWith(options.data, kManifestSuffix) &&
             !env->FileExists(JoinPath(options.data, ManifestFileName("train")))) {
    auto idx_test = OpenOrShardDataset(env, options.data, "test", options.cache_dir);
    if (idx_test.ok()) test = std::move(*idx_test);
  }
  if (test != nullptr && !(test->spec() == train.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        test->manifest_path(), ": records differ in shape or type from ", train.manifest_path(),
        " (test: ", RecordsText(test->spec()), "; train: ", RecordsText(train.spec()), ")"));
  }
  return test;
}

}  // namespace

absl::StatusOr<Splits> OpenSplits(Env* env, const SplitSources& options, const ModelConfig& model,
                                  const BatchFormat& format) {
  Splits splits;
  ASSIGN_OR_RETURN(splits.train, OpenOrShardDataset(env, options.data, "train", options.cache_dir));
  RETURN_IF_ERROR(CheckTrainable(*splits.train, model, format));
  if (options.evaluate) {
    ASSIGN_OR_RETURN(splits.test, OpenTestSplit(env, options, *splits.train));
    if (splits.test != nullptr && SameManifest(*splits.test, *splits.train)) {
      // --data ds/test.manifest.json: its "test sibling" is itself, and the accuracy printed
      // as the test accuracy was that of the training records.
      splits.not_evaluated = absl::StrCat(
          "the test split is the split trained on (", splits.test->manifest_path(),
          "): evaluating on it would only measure the training records; give another split "
          "with --test-data");
      splits.test = nullptr;
    }
    if (splits.test != nullptr) RETURN_IF_ERROR(CheckClassCount(*splits.test, model));
  }
  return splits;
}

}  // namespace sluice
