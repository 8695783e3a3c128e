// Ceilings: what each stage of the data path can do on this machine and this dataset when
// nothing else limits it, measured in isolation. The bottleneck report shows each
// stage against its ceiling.
//
// Measured (each bounded to CeilingOptions::seconds_per_measurement, the whole set well under
// 3 s on the CI machines):
//   read        MB/s of stored frames, pread through the Env (ShardReader::ReadStoredFrame),
//               one thread; warm page cache (the frames are read once before timing)
//   decompress  MB/s of raw output per thread (ShardReader::DecodeFrame, checksum included)
//   decode      images/s per thread of the run's decoder (DecodeImage: libjpeg-turbo, libspng)
//               on the measured frames' encoded images; not measured for other records
//   preprocess  samples/s per thread: the u8 -> h2d-format normalize + gather of a batch, with
//               the pipeline's own SampleConverter (pipeline/convert.h)
//   pinned      memcpy MB/s per thread into page-aligned (pinned with CUDA) host memory
//   h2d         GB/s pinned and pageable, through the device layer (a copy stream, timing
//               events): on the simulated device with the run's link model (--device sim) or
//               on a CUDA device; otherwise "not measured: no CUDA device"
//   compute     train steps/s of the run's backend with the run's options, on a batch of the
//               dataset's real samples (so the backend takes the path real data takes); on a
//               device backend the batch is uploaded once and the steps are timed with events
//               on the compute stream; the fastest of 3 rounds
//
// Cache: JSON at `<cache_dir>/ceilings/<key>.json`, key = hostname + manifest checksum + batch
// size + h2d format + device + model + a digest of every other setting that changes a ceiling
// (backend threads, precision, graphs, optimizer, normalization, the sim model, measurement
// time, and the build: BuildId(), the ELF build ID of the code that measures); LoadOrMeasure
// reuses it unless `refresh` or the file's `build` is not this build's (a ceiling measured by
// older code, e.g. a slower compute step, would put this build's stages at 200% of it).
// Errors: kNotFound / kDataLoss from the dataset; kDataLoss for a cache file that does not
// parse (LoadOrMeasure then re-measures); backend creation errors for compute.
// Thread safety: plain values; Measure runs on the calling thread.
#ifndef SLUICE_ENGINE_DIAGNOSTICS_CEILINGS_H_
#define SLUICE_ENGINE_DIAGNOSTICS_CEILINGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/backend_factory.h"
#include "engine/model.h"
#include "nlohmann/json.hpp"
#include "pipeline/batch.h"
#include "pipeline/pipeline.h"
#include "report/record/ceiling_figures.h"
#include "storage/dataset.h"

namespace sluice {

struct CeilingOptions {
  uint32_t batch_size = 32;
  BatchFormat format;  // the batches' h2d format and normalization
  // Compute is measured on this backend: its device (as --device) and platform settings;
  // options.max_batch is set from batch_size; the batches carry the normalization.
  BackendSpec backend = [] {
    BackendSpec cpu;
    cpu.device.platform = device::Platform::kCpu;
    return cpu;
  }();
  ModelConfig model;
  OptimizerConfig optimizer;
  bool measure_compute = true;
  double seconds_per_measurement = 0.25;
  std::string cache_dir;  // LoadOrMeasure: empty = DefaultCacheDir()
  bool refresh = false;   // LoadOrMeasure: ignore a cached file
  // LoadOrMeasure: return the cached ceilings or kFailedPrecondition, never measure (a stopped
  // run must not spend the modelled time of a slow device measuring its compute ceiling).
  bool cached_only = false;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_DIAGNOSTICS_CEILINGS_H_
