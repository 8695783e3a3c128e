// Ceilings as plain figures: what each stage of the data path can do on this machine, as
// measured by Ceilings::Measure (engine/diagnostics/ceilings.h, which documents each
// measurement and the cache). This header and its JSON (Load, Save, ToJson, FromJson) are part
// of the report library, which reads ceilings but never measures them: Measure, LoadOrMeasure
// and CacheKey create backends and are defined in the ceilings library (ceilings.cc).
// Thread safety: plain values.
#ifndef SLUICE_REPORT_RECORD_CEILING_FIGURES_H_
#define SLUICE_REPORT_RECORD_CEILING_FIGURES_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "nlohmann/json.hpp"

namespace sluice {

class Dataset;
struct CeilingOptions;  // engine/diagnostics/ceilings.h

// One ceiling. Rates are per thread (compute: per backend). `measured` false: `note` says why.
struct Ceiling {
  bool measured = false;
  double mb_per_s = 0;  // 1 MB = 1e6 bytes
  double samples_per_s = 0;
  double items_per_s = 0;  // frames/s (read, decompress), batches or steps/s (the others)
  // H2D copies only: the time per copy that does not follow its bytes (latency, launch), from
  // copies of the batch and of a quarter of it; 0 elsewhere. What u8 batches cannot shrink.
  double fixed_us_per_item = 0;
  std::string note;  // how it was measured, or why not
};

struct Ceilings {
  std::string key;  // the cache key (see above)
  std::string hostname;
  std::string build;        // BuildId() of the code that measured (common/build_id.h)
  std::string measured_at;  // UTC, ISO 8601
  // Other processes' average use of the cores while these were measured (common/cpu_load.h);
  // at kBusyMachineCores or more the figures understate the stages alone.
  double other_cores_busy = 0;
  Ceiling read;
  Ceiling decompress;
  Ceiling decode;  // images/s of the run's decoder, 1 thread (encoded images only)
  Ceiling preprocess;
  Ceiling pinned_memcpy;
  Ceiling h2d_pinned;
  Ceiling h2d_pageable;
  Ceiling compute;

  // Measures every ceiling on `dataset` (at most 8 frames are used); on a busy machine
  // (other processes at kBusyMachineCores or more) once more, keeping the quieter.
  static absl::StatusOr<Ceilings> Measure(const Dataset& dataset, const CeilingOptions& options);
  static absl::StatusOr<Ceilings> MeasureOnce(const Dataset& dataset,
                                              const CeilingOptions& options);
  // Reads a cache file written by Save.
  static absl::StatusOr<Ceilings> Load(Env* env, const std::string& path);
  // The cached figures for (this host, dataset, options) or, when absent, stale in format,
  // unreadable or `options.refresh`, a fresh Measure() saved to the cache.
  static absl::StatusOr<Ceilings> LoadOrMeasure(Env* env, const Dataset& dataset,
                                                const CeilingOptions& options);
  static std::string CacheKey(const Dataset& dataset, const CeilingOptions& options);
  static std::string CachePath(const std::string& cache_dir, const std::string& key);

  absl::Status Save(Env* env, const std::string& path) const;  // atomic write
  nlohmann::ordered_json ToJson() const;
  static absl::StatusOr<Ceilings> FromJson(const nlohmann::ordered_json& j);
};

inline constexpr char kCeilingsSchema[] = "sluice.ceilings/1";
// Ceilings measured while other processes used this many cores or more are measured again
// (Ceilings::Measure, LoadOrMeasure) and said to understate in the report.
inline constexpr double kBusyMachineCores = 0.25;

}  // namespace sluice

#endif  // SLUICE_REPORT_RECORD_CEILING_FIGURES_H_
