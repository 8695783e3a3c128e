// sluice-shard verify and export: the checks of a dataset's splits, and IDX written after them.
#include "tools/sluice_shard_verify.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/output_target.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/dataset.h"
#include "storage/dataset_files.h"
#include "storage/dataset_records.h"
#include "storage/idx.h"
#include "storage/shard_format.h"

namespace sluice {
namespace {

// Files in a dataset directory that no manifest names: a warning line each on stderr. *.tmp
// files are leftovers of an interrupted write; a "<split>-*.shard" of a verified split that its
// manifest does not list is an error (a stale or misplaced shard). The lock file is ignored.
absl::Status ReportExtraFiles(const std::string& dir, const std::vector<std::string>& children,
                              const std::vector<std::unique_ptr<Dataset>>& datasets) {
  std::set<std::string> known = {".sluice.lock"};
  for (const auto& ds : datasets) {
    known.insert(BaseName(ds->manifest_path()));
    for (const ShardEntry& e : ds->manifest().shards) known.insert(e.file);
  }
  std::vector<std::string> sorted = children;
  std::sort(sorted.begin(), sorted.end());
  for (const std::string& c : sorted) {
    if (known.count(c) > 0) continue;
    const std::string p = JoinPath(dir, c);
    if (absl::EndsWith(c, ".tmp")) {
      std::fprintf(stderr,
                   "sluice-shard verify: warning: %s: leftover of an interrupted write (in no "
                   "manifest; safe to delete while no writer holds the directory)\n",
                   Printable(p).c_str());
      continue;
    }
    const Dataset* owner = nullptr;
    for (const auto& ds : datasets) {
      if (absl::StartsWith(c, ds->manifest().split + "-") && absl::EndsWith(c, kShardSuffix)) {
        owner = ds.get();
      }
    }
    if (owner != nullptr) {
      // A warning, not a failure: a rewrite that crashed before its manifest switch leaves
      // its new shards behind while the old split stays valid (the next write removes them).
      std::fprintf(stderr,
                   "sluice-shard verify: warning: %s: looks like a shard of split \"%s\" but %s "
                   "does not list it (a leftover of an interrupted rewrite; the next write of "
                   "the split removes it)\n",
                   Printable(p).c_str(), Printable(owner->manifest().split).c_str(),
                   Printable(owner->manifest_path()).c_str());
      continue;
    }
    std::fprintf(stderr,
                 "sluice-shard verify: warning: %s: unexpected file, in no split's manifest\n",
                 Printable(p).c_str());
  }
  return absl::OkStatus();
}

// OK when directory `dir` holds a manifest of `split`. Else kNotFound naming the split and
// listing the splits there: export --split test of a folder whose only split is train wrote
// the train split, exit 0, as if it were the test split.
absl::Status CheckSplitThere(Env* env, const std::string& dir, const std::string& split) {
  absl::StatusOr<std::vector<std::string>> children = env->GetChildren(dir);
  if (!children.ok()) return absl::OkStatus();  // Dataset::Open names the directory
  std::vector<std::string> splits;
  for (absl::string_view c : *children) {
    if (c == ManifestFileName(split)) return absl::OkStatus();
    if (absl::ConsumeSuffix(&c, kManifestSuffix)) splits.push_back(Printable(c));
  }
  if (splits.empty()) return absl::OkStatus();  // Dataset::Open: not a dataset
  std::sort(splits.begin(), splits.end());
  return absl::NotFoundError(absl::StrCat(Printable(dir), ": no split \"", Printable(split),
                                          "\" (expected ",
                                          Printable(JoinPath(dir, ManifestFileName(split))),
                                          "); the splits there: ", absl::StrJoin(splits, ", ")));
}

}  // namespace

absl::Status RunVerify(Env* env, const std::string& path) {
  std::vector<std::string> manifests;
  std::vector<std::string> children_list;
  const bool is_dir = !absl::EndsWith(path, kManifestSuffix);
  if (!is_dir) {
    manifests.push_back(path);
  } else {
    auto children = env->GetChildren(path);
    if (!children.ok()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": expected a dataset directory (", children.status().message(), ")"));
    }
    for (const std::string& c : *children) {
      if (absl::EndsWith(c, kManifestSuffix)) manifests.push_back(JoinPath(path, c));
    }
    if (manifests.empty()) {
      return absl::NotFoundError(absl::StrCat(path, ": no *", kManifestSuffix,
                                              " (not a dataset, or its writing did not finish)"));
    }
    std::sort(manifests.begin(), manifests.end());
    children_list = std::move(*children);
  }
  std::vector<std::unique_ptr<Dataset>> datasets;
  for (const std::string& mp : manifests) {
    ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds,
                     Dataset::Open(env, mp, "train", ShardFiles::kOneAtATime));
    RETURN_IF_ERROR(VerifyDataset(*ds));
    std::printf("OK %s: %llu records in %zu shards, every checksum and count verified\n",
                Printable(mp).c_str(), static_cast<unsigned long long>(ds->record_count()),
                ds->manifest().shards.size());
    datasets.push_back(std::move(ds));
  }
  std::fflush(stdout);
  if (is_dir) RETURN_IF_ERROR(ReportExtraFiles(path, children_list, datasets));
  return absl::OkStatus();
}

absl::Status RunExport(Env* env, const std::string& path, const std::string& prefix,
                       const std::string& split) {
  // The writers' check: a name no writer writes names no split to export.
  if (absl::Status named = CheckSplitName(split.empty() ? "train" : split); !named.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("export: --split: ", named.message()));
  }
  const bool is_dir = !absl::EndsWith(path, kManifestSuffix);
  if (!split.empty() && is_dir) RETURN_IF_ERROR(CheckSplitThere(env, path, split));
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds,
                   Dataset::Open(env, path, split.empty() ? "train" : split));
  if (!split.empty() && !is_dir && ds->manifest().split != split) {
    // A manifest of another split: --split does not pick a sibling of the manifest named.
    return absl::InvalidArgumentError(
        absl::StrCat(Printable(ds->manifest_path()), " is split \"",
                     Printable(ds->manifest().split), "\", not --split ", Printable(split),
                     " (name the split's manifest, or give the directory ", "with --split)"));
  }
  // The two outputs are checked before anything is read: a FIFO without a reader, a directory
  // or a socket there fails now, not after the split is decoded (or never, waiting on a FIFO).
  const std::string dir = DirName(prefix);
  RETURN_IF_ERROR(ProbeOutputDirectory(dir, "out"));
  if (env->GetChildren(dir).ok()) {
    const IdxPaths out = IdxPathsFor(prefix, ds->spec());
    RETURN_IF_ERROR(ProbeOutputFile(env, out.images, "out"));
    RETURN_IF_ERROR(ProbeOutputFile(env, out.labels, "out"));
    // Never a file of the dataset read, under another name (a hard or a symbolic link).
    RETURN_IF_ERROR(CheckNotADatasetFile(out.images, ds->manifest_path(), "--out"));
    RETURN_IF_ERROR(CheckNotADatasetFile(out.labels, ds->manifest_path(), "--out"));
  }
  // ReadAllRecords checks each frame's checksum as it decodes; VerifyDataset adds what `verify`
  // checks beyond that (header fields, sizes, the manifest's whole-file xxh3 of every shard).
  // Both run before any output file is written.
  ASSIGN_OR_RETURN(RecordArrays records, ReadAllRecords(*ds));
  RETURN_IF_ERROR(VerifyDataset(*ds));
  ASSIGN_OR_RETURN(IdxPaths paths, WriteIdxPair(env, prefix, records));
  std::printf("%s -> %s, %s (%llu records, raw IDX)\n", Printable(ds->manifest_path()).c_str(),
              Printable(paths.images).c_str(), Printable(paths.labels).c_str(),
              static_cast<unsigned long long>(records.count));
  return absl::OkStatus();
}

}  // namespace sluice
