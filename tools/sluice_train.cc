// sluice-train: trains an MLP from a shard dataset (or IDX files) through the sluice pipeline,
// on the GPU when there is one and on the CPU otherwise, and ends with the bottleneck report.
//
//   sluice-train --data DIR [--test-data DIR] [--epochs 10] [--batch-size 32] [--lr 0.01] ...
//   sluice-train --helpfull lists every flag.
//
// Exit codes: 0 success, 1 runtime/data error (missing or corrupt data, CUDA unavailable, out
// of memory, I/O), 2 usage error (bad flag values). Only main() turns a Status into an exit code.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/limits.h"
#include "engine/dist/communicator.h"
#include "common/status_macros.h"
#include "engine/diagnostics/bottleneck_report.h"
#include "engine/diagnostics/ceilings.h"
#include "engine/diagnostics/trace_writer.h"
#include "engine/job/train_job.h"
#include "tools/tool_flags.h"

ABSL_FLAG(std::string, data, "", "Training split: a shard dataset directory, a manifest, or a "
          "directory of IDX files (sharded once into --cache-dir)");
ABSL_FLAG(std::string, test_data, "", "Evaluation split; default: the dataset's sibling 'test' "
          "split (or the t10k IDX files beside the train files)");
ABSL_FLAG(bool, evaluate, true, "Evaluate on the test split after each epoch");
ABSL_FLAG(std::string, cache_dir, "", "Where IDX input is sharded (default ~/.cache/sluice)");
ABSL_FLAG(int64_t, epochs, 10, "Epochs to train");
ABSL_FLAG(int64_t, batch_size, 32, "Samples per batch");
ABSL_FLAG(double, lr, 0.01, "Learning rate");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd | adamw");
ABSL_FLAG(double, momentum, 0.0, "SGD momentum");
ABSL_FLAG(bool, nesterov, false, "SGD Nesterov momentum");
ABSL_FLAG(double, weight_decay, 0.0, "Weight decay (SGD: L2; AdamW: decoupled)");
ABSL_FLAG(double, beta1, 0.9, "AdamW beta1");
ABSL_FLAG(double, beta2, 0.999, "AdamW beta2");
ABSL_FLAG(double, eps, 1e-8, "AdamW epsilon");
ABSL_FLAG(std::string, lr_schedule, "constant", "constant | step | cosine");
ABSL_FLAG(int64_t, lr_step_size, 0, "step schedule: multiply the rate by --lr-gamma every N steps");
ABSL_FLAG(double, lr_gamma, 0.1, "step schedule factor");
ABSL_FLAG(int64_t, warmup_steps, 0, "cosine schedule: linear warmup steps");
ABSL_FLAG(std::string, layers, "784,128,10", "MLP layer sizes, input first");
ABSL_FLAG(std::string, device, "auto",
          "auto | cpu | cuda | cuda:N | sim | sim:N (a simulated accelerator: see --sim-*)");
ABSL_FLAG(double, sim_link_gbps, 25.0,
          "--device sim: modelled host-to-device link bandwidth, GB/s (1e9 bytes/s)");
ABSL_FLAG(double, sim_latency_us, 0.0, "--device sim: latency added to every copy, microseconds");
ABSL_FLAG(double, sim_compute_us, 0.0,
          "--device sim: modelled compute time of one training step, microseconds (0: just the "
          "CPU kernels' own time)");
ABSL_FLAG(double, sim_compute_samples_per_s, 0.0,
          "--device sim: modelled compute rate; a step takes at least batch / rate (0: none)");
ABSL_FLAG(bool, sim_poison, false,
          "--device sim: overwrite a device slot with a poison pattern while a copy into it is "
          "in flight (catches slots read before their copy or reused too early)");
ABSL_FLAG(uint64_t, sim_jitter_seed, 0,
          "--device sim: delay every stream operation by a seeded random 0..50 us (0: off)");
ABSL_FLAG(std::string, precision, "fp32", "fp32 | bf16 | fp16 (CUDA; fp32 master weights)");
ABSL_FLAG(bool, cuda_graph, false, "CUDA: capture the train step into a CUDA Graph");
ABSL_FLAG(bool, exchange_always, false,
          "Run the gradient exchange (MPI; NCCL on CUDA) even in a single process, where it "
          "changes nothing: executes the data-parallel path on one device (tests, GPU check)");
ABSL_FLAG(uint64_t, seed, 0, "Seed of initialization and shuffle");
ABSL_FLAG(bool, shuffle, false, "Shuffle (off: file order, as the reference DataLoader)");
ABSL_FLAG(int64_t, shuffle_window, 64, "Frames per shuffle window (0: all frames; at most "
          "1048576)");
ABSL_FLAG(bool, drop_last, false, "Drop a short last batch");
ABSL_FLAG(std::string, h2d_format, "auto", "What crosses PCIe: u8 | f16 | f32 | auto (u8 on "
          "CUDA, f32 on the CPU)");
ABSL_FLAG(double, normalize_mean, 0.0, "Normalization (x/255 - mean)/std");
ABSL_FLAG(double, normalize_std, 1.0, "Normalization (x/255 - mean)/std");
ABSL_FLAG(int64_t, threads, 0, "Pipeline threads (0: all cores; at most 4 x hardware threads)");
ABSL_FLAG(int64_t, decompress_threads, 0, "Decompress concurrency (0: --threads; at most 4 x "
          "hardware threads)");
ABSL_FLAG(int64_t, preprocess_threads, 0, "Preprocess concurrency (0: --threads; at most 4 x "
          "hardware threads)");
ABSL_FLAG(int64_t, compute_threads, 0,
          "CPU backend: threads each batch is split across (0: the cores the pipeline does not "
          "need, engine/job/train_job.h; at most 4 x hardware threads)");
ABSL_FLAG(int64_t, pool_size, 0, "Pinned batch buffers (0: enough for 4096 samples, 4..256; "
          "at most 1024)");
ABSL_FLAG(int64_t, read_ahead, 4, "Frames read ahead (at most 1024)");
ABSL_FLAG(std::string, on_corrupt, "fail", "fail | skip (skip corrupt frames, count them)");
ABSL_FLAG(double, max_corrupt_fraction, 0.01, "--on-corrupt=skip: fail once more than this "
          "fraction of the records read in a split were skipped as corrupt (0..1)");
ABSL_FLAG(std::string, checkpoint_dir, "", "Write checkpoints here");
ABSL_FLAG(int64_t, checkpoint_every, 0, "Checkpoint every N steps (0: at the end only)");
ABSL_FLAG(std::string, resume, "", "Resume from this checkpoint file, or 'auto' (the "
          "--checkpoint-dir checkpoint when present)");
ABSL_FLAG(std::string, export_safetensors, "", "Export the trained weights (PyTorch names)");
ABSL_FLAG(std::string, metrics_out, "", "JSON lines, one per epoch");
ABSL_FLAG(std::string, record_order, "",
          "write each trained step's record ids (\"epoch step id ...\") to this file, to audit "
          "the sample order; under mpirun each rank writes FILE.rank<R>");
ABSL_FLAG(int64_t, progress_every, 200, "Steps between progress updates");
ABSL_FLAG(bool, quiet, false, "No progress lines");
ABSL_FLAG(int64_t, stop_after_steps, -1, "Testing: stop (as if killed) after N steps");
ABSL_FLAG(std::string, inject_delay, "", "Diagnostic: STAGE:MICROSECONDS[,...] busy-waits that "
          "long per item in a stage (read, decompress, preprocess, h2d, compute); see "
          "docs/bottleneck.md");

ABSL_FLAG(bool, report, true, "Print the bottleneck report at the end");
ABSL_FLAG(std::string, report_json, "", "Write the bottleneck report as JSON "
          "(docs/report-schema.md)");
ABSL_FLAG(int64_t, report_every, 0, "Also print a short report every N steps (0: only at the end)");
ABSL_FLAG(std::string, trace, "", "Write a Chrome/Perfetto trace of the pipeline stages and "
          "compute (open in ui.perfetto.dev or chrome://tracing)");
ABSL_FLAG(int64_t, trace_spans, 2000000, "Most spans kept for --trace (at most 50000000)");
ABSL_FLAG(bool, ceilings, true, "Measure (once per host and dataset, cached) each stage's "
          "ceiling for the report");
ABSL_FLAG(bool, refresh_ceilings, false, "Measure the ceilings again instead of using the cache");
ABSL_FLAG(std::string, what_if, "none", "Diagnostic: make one stage free and report the "
          "throughput: read | decompress | preprocess | h2d | compute | all (a table with each "
          "stage removed in turn next to the normal run)");

ABSL_FLAG(bool, autotune, false, "After the first epoch, adjust stage concurrency, pool size "
          "and read-ahead from the measured statistics and say what changed and why");
ABSL_FLAG(int64_t, autotune_memory_mb, 256, "--autotune: most MiB of pinned batch buffers "
          "(at most 65536)");

namespace sluice {
namespace {

// Documented maxima of the concurrency and buffer flags (docs/limits.md); thread counts are
// bounded by MaxThreads() (4 x hardware threads).
constexpr int64_t kMaxBatchSize = INT32_MAX;    // backends index a batch with int
constexpr int64_t kMaxPoolSize = 1024;          // batch buffers
constexpr int64_t kMaxReadAhead = 1024;         // frames held decompressed ahead of use
constexpr int64_t kMaxShuffleWindow = 1 << 20;  // frames; 0 already means the whole split
constexpr int64_t kMaxTraceSpans = 50000000;    // about 2.4 GiB of spans
constexpr int64_t kMaxAutotuneMemoryMb = 65536;

absl::Status UsageError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", what));
}

// A finite value in [lo, hi] ((lo, hi] when `lo_open`; [lo, hi) when `hi_open`); NaN and
// infinities are refused. The message states the range.
absl::StatusOr<double> InRange(absl::string_view flag, double v, double lo, double hi,
                               bool lo_open = false, bool hi_open = false) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok) {
    return UsageError(flag, absl::StrCat("must be a finite number in ", lo_open ? "(" : "[", lo,
                                         ", ", hi, hi_open ? ")" : "]", ", got ", v));
  }
  return v;
}

template <typename T>
absl::StatusOr<T> Positive(absl::string_view flag, int64_t v, bool allow_zero = false) {
  if (v < 0 || (!allow_zero && v == 0)) {
    return UsageError(flag, absl::StrCat("must be ", allow_zero ? ">= 0" : ">= 1", ", got ", v));
  }
  return static_cast<T>(v);
}

// Flags -> job options, one group at a time. Every failure is a usage error (exit code 2).

// --data, --test-data, --evaluate, --cache-dir, --epochs, --batch-size, --layers.
absl::Status DataAndModelFromFlags(TrainJobOptions& o) {
  o.data = absl::GetFlag(FLAGS_data);
  if (o.data.empty()) return UsageError("data", "required (a shard dataset or IDX directory)");
  o.test_data = absl::GetFlag(FLAGS_test_data);
  o.evaluate = absl::GetFlag(FLAGS_evaluate);
  o.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  ASSIGN_OR_RETURN(o.epochs, Positive<uint64_t>("epochs", absl::GetFlag(FLAGS_epochs)));
  RETURN_IF_ERROR(CheckAtMost("batch-size", absl::GetFlag(FLAGS_batch_size), kMaxBatchSize,
                              "the backends index a batch with a 32-bit int"));
  ASSIGN_OR_RETURN(o.pipeline.order.batch_size,
                   Positive<uint32_t>("batch-size", absl::GetFlag(FLAGS_batch_size)));
  auto layers = ParseLayers(absl::GetFlag(FLAGS_layers));
  if (!layers.ok()) return UsageError("layers", layers.status().message());
  o.model = *layers;

  return absl::OkStatus();
}

// --optimizer and its hyper-parameters, --lr-schedule.
absl::Status OptimizerFromFlags(OptimizerConfig& opt) {
  auto kind = ParseOptimizerKind(absl::GetFlag(FLAGS_optimizer));
  if (!kind.ok()) return UsageError("optimizer", kind.status().message());
  opt.kind = *kind;
  ASSIGN_OR_RETURN(const double lr, InRange("lr", absl::GetFlag(FLAGS_lr), 0, 10, true));
  opt.lr = static_cast<float>(lr);
  ASSIGN_OR_RETURN(const double momentum,
                   InRange("momentum", absl::GetFlag(FLAGS_momentum), 0, 1, false, true));
  opt.momentum = static_cast<float>(momentum);
  opt.nesterov = absl::GetFlag(FLAGS_nesterov);
  if (opt.nesterov && opt.momentum == 0) return UsageError("nesterov", "needs --momentum > 0");
  ASSIGN_OR_RETURN(const double weight_decay,
                   InRange("weight-decay", absl::GetFlag(FLAGS_weight_decay), 0, 1));
  opt.weight_decay = static_cast<float>(weight_decay);
  ASSIGN_OR_RETURN(const double beta1,
                   InRange("beta1", absl::GetFlag(FLAGS_beta1), 0, 1, false, true));
  ASSIGN_OR_RETURN(const double beta2,
                   InRange("beta2", absl::GetFlag(FLAGS_beta2), 0, 1, false, true));
  ASSIGN_OR_RETURN(const double eps, InRange("eps", absl::GetFlag(FLAGS_eps), 0, 1, true));
  opt.beta1 = static_cast<float>(beta1);
  opt.beta2 = static_cast<float>(beta2);
  opt.eps = static_cast<float>(eps);
  auto schedule = ParseLrSchedule(absl::GetFlag(FLAGS_lr_schedule));
  if (!schedule.ok()) return UsageError("lr-schedule", schedule.status().message());
  opt.schedule = *schedule;
  if (opt.schedule == LrSchedule::kStep) {
    ASSIGN_OR_RETURN(opt.step_size,
                     Positive<int64_t>("lr-step-size", absl::GetFlag(FLAGS_lr_step_size)));
    ASSIGN_OR_RETURN(const double gamma,
                     InRange("lr-gamma", absl::GetFlag(FLAGS_lr_gamma), 0, 1, true));
    opt.gamma = static_cast<float>(gamma);
  } else if (opt.schedule == LrSchedule::kCosine) {
    ASSIGN_OR_RETURN(opt.warmup_steps, Positive<int64_t>("warmup-steps",
                                                         absl::GetFlag(FLAGS_warmup_steps), true));
  }

  return absl::OkStatus();
}

// --device, --precision, --cuda-graph, --compute-threads, --seed.
absl::Status DeviceFromFlags(TrainJobOptions& o) {
  o.device = absl::GetFlag(FLAGS_device);
  if (o.device != "auto" && o.device != "cpu" && o.device.rfind("cuda", 0) != 0 &&
      o.device.rfind("sim", 0) != 0) {
    return UsageError("device", absl::StrCat("expected auto, cpu, cuda, cuda:N, sim or sim:N, "
                                             "got \"", o.device, "\""));
  }
  const double gbps = absl::GetFlag(FLAGS_sim_link_gbps);
  if (!(gbps > 0) || !std::isfinite(gbps)) return UsageError("sim-link-gbps", "must be > 0");
  o.backend.sim.link_bytes_per_s = gbps * 1e9;
  const double latency_us = absl::GetFlag(FLAGS_sim_latency_us);
  if (!(latency_us >= 0) || !std::isfinite(latency_us)) {
    return UsageError("sim-latency-us", "must be >= 0");
  }
  o.backend.sim.link_latency_ns = static_cast<int64_t>(latency_us * 1e3);
  const double compute_us = absl::GetFlag(FLAGS_sim_compute_us);
  if (!(compute_us >= 0) || !std::isfinite(compute_us)) {
    return UsageError("sim-compute-us", "must be >= 0");
  }
  o.backend.sim_compute_ns_per_step = static_cast<int64_t>(compute_us * 1e3);
  const double rate = absl::GetFlag(FLAGS_sim_compute_samples_per_s);
  if (!(rate >= 0) || !std::isfinite(rate)) {
    return UsageError("sim-compute-samples-per-s", "must be >= 0");
  }
  o.backend.sim_compute_samples_per_s = rate;
  o.backend.sim.poison = absl::GetFlag(FLAGS_sim_poison);
  o.backend.sim.jitter_seed = absl::GetFlag(FLAGS_sim_jitter_seed);
  auto precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return UsageError("precision", precision.status().message());
  o.backend.precision = *precision;
  o.backend.cuda_graph = absl::GetFlag(FLAGS_cuda_graph);
  o.backend.exchange_in_world_of_one = absl::GetFlag(FLAGS_exchange_always);
  RETURN_IF_ERROR(CheckThreadCount("compute-threads", absl::GetFlag(FLAGS_compute_threads)));
  ASSIGN_OR_RETURN(o.backend.threads, Positive<int>("compute-threads",
                                                    absl::GetFlag(FLAGS_compute_threads), true));
  o.seed = absl::GetFlag(FLAGS_seed);

  return absl::OkStatus();
}

// The pipeline: order, batch format, resources, corruption policy. Needs o.device (the
// automatic h2d format depends on it).
absl::Status PipelineFromFlags(TrainJobOptions& o) {
  PipelineOptions& p = o.pipeline;
  p.order.shuffle = absl::GetFlag(FLAGS_shuffle);
  RETURN_IF_ERROR(CheckAtMost("shuffle-window", absl::GetFlag(FLAGS_shuffle_window),
                              kMaxShuffleWindow, "frames; 0 means the whole split"));
  ASSIGN_OR_RETURN(p.order.shuffle_window_frames,
                   Positive<uint32_t>("shuffle-window", absl::GetFlag(FLAGS_shuffle_window), true));
  p.order.drop_last = absl::GetFlag(FLAGS_drop_last);
  const std::string h2d = absl::GetFlag(FLAGS_h2d_format);
  if (h2d == "auto") {
    // u8 moves 4x fewer bytes over PCIe and normalizes on the GPU; on the CPU there is no
    // copy, and the backend reads f32 without converting again.
    const bool cuda = o.device.rfind("cuda", 0) == 0 || (o.device == "auto" && device::CudaDeviceCount() > 0);
    p.format.h2d_format = cuda ? H2DFormat::kU8 : H2DFormat::kF32;
  } else {
    auto format = ParseH2DFormat(h2d);
    if (!format.ok()) return UsageError("h2d-format", format.status().message());
    p.format.h2d_format = *format;
  }
  ASSIGN_OR_RETURN(const double mean,
                   InRange("normalize-mean", absl::GetFlag(FLAGS_normalize_mean), -10, 10));
  ASSIGN_OR_RETURN(const double stddev,
                   InRange("normalize-std", absl::GetFlag(FLAGS_normalize_std), 1e-6, 1e3));
  p.format.normalization.mean = static_cast<float>(mean);
  p.format.normalization.std = static_cast<float>(stddev);
  RETURN_IF_ERROR(CheckThreadCount("threads", absl::GetFlag(FLAGS_threads)));
  RETURN_IF_ERROR(CheckThreadCount("decompress-threads", absl::GetFlag(FLAGS_decompress_threads)));
  RETURN_IF_ERROR(CheckThreadCount("preprocess-threads", absl::GetFlag(FLAGS_preprocess_threads)));
  RETURN_IF_ERROR(CheckAtMost("pool-size", absl::GetFlag(FLAGS_pool_size), kMaxPoolSize,
                              "batch buffers"));
  RETURN_IF_ERROR(CheckAtMost("read-ahead", absl::GetFlag(FLAGS_read_ahead), kMaxReadAhead,
                              "frames held decompressed ahead of use"));
  ASSIGN_OR_RETURN(p.resources.threads, Positive<int>("threads", absl::GetFlag(FLAGS_threads), true));
  ASSIGN_OR_RETURN(p.resources.decompress_threads, Positive<int>("decompress-threads",
                                                       absl::GetFlag(FLAGS_decompress_threads), true));
  ASSIGN_OR_RETURN(p.resources.preprocess_threads, Positive<int>("preprocess-threads",
                                                       absl::GetFlag(FLAGS_preprocess_threads), true));
  ASSIGN_OR_RETURN(p.resources.pool_size,
                   Positive<uint32_t>("pool-size", absl::GetFlag(FLAGS_pool_size), true));
  if (p.resources.pool_size == 1) return UsageError("pool-size", "must be 0 (auto) or >= 2");
  ASSIGN_OR_RETURN(p.resources.read_ahead_frames,
                   Positive<uint32_t>("read-ahead", absl::GetFlag(FLAGS_read_ahead), true));
  auto on_corrupt = ParseOnCorrupt(absl::GetFlag(FLAGS_on_corrupt));
  if (!on_corrupt.ok()) return UsageError("on-corrupt", on_corrupt.status().message());
  p.on_corrupt = *on_corrupt;
  ASSIGN_OR_RETURN(o.max_corrupt_fraction,
                   InRange("max-corrupt-fraction", absl::GetFlag(FLAGS_max_corrupt_fraction), 0, 1));

  return absl::OkStatus();
}

// Checkpoints, resume, export, metrics.
absl::Status OutputsFromFlags(TrainJobOptions& o) {
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  ASSIGN_OR_RETURN(o.checkpoint_every, Positive<int64_t>("checkpoint-every",
                                                         absl::GetFlag(FLAGS_checkpoint_every), true));
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty()) {
    return UsageError("checkpoint-every", "needs --checkpoint-dir");
  }
  o.resume = absl::GetFlag(FLAGS_resume);
  if (o.resume == "auto" && o.checkpoint_dir.empty()) {
    return UsageError("resume", "'auto' needs --checkpoint-dir");
  }
  o.export_safetensors = absl::GetFlag(FLAGS_export_safetensors);
  o.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  o.record_order_path = absl::GetFlag(FLAGS_record_order);
  o.stop_after_steps = absl::GetFlag(FLAGS_stop_after_steps);
  return absl::OkStatus();
}

// --trace, --report-every, --what-if, --autotune, --inject-delay.
absl::Status DiagnosticsFromFlags(TrainJobOptions& o) {
  if (!absl::GetFlag(FLAGS_trace).empty()) {
    RETURN_IF_ERROR(CheckAtMost("trace-spans", absl::GetFlag(FLAGS_trace_spans), kMaxTraceSpans,
                                "spans kept in memory"));
    ASSIGN_OR_RETURN(o.pipeline.diagnostics.trace_capacity,
                     Positive<size_t>("trace-spans", absl::GetFlag(FLAGS_trace_spans)));
  }
  ASSIGN_OR_RETURN(o.report_every_steps,
                   Positive<int64_t>("report-every", absl::GetFlag(FLAGS_report_every), true));
  const std::string what_if = absl::GetFlag(FLAGS_what_if);
  if (what_if != "all" && what_if != "compute") {
    auto w = ParseWhatIf(what_if);
    if (!w.ok()) {
      return UsageError("what-if", absl::StrCat("expected none, read, decompress, preprocess, "
                                                "h2d, compute or all, got \"", what_if, "\""));
    }
    o.pipeline.diagnostics.what_if = *w;
  }
  o.compute_free = what_if == "compute";
  o.autotune = absl::GetFlag(FLAGS_autotune);
  RETURN_IF_ERROR(CheckAtMost("autotune-memory-mb", absl::GetFlag(FLAGS_autotune_memory_mb),
                              kMaxAutotuneMemoryMb, "MiB of batch buffers"));
  ASSIGN_OR_RETURN(const int64_t autotune_mb, Positive<int64_t>("autotune-memory-mb",
                                                                 absl::GetFlag(FLAGS_autotune_memory_mb)));
  o.autotune_memory_bytes = static_cast<uint64_t>(autotune_mb) << 20;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_inject_delay), ',',
                                               absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits(':', 1));
    int64_t us = 0;
    if (!absl::SimpleAtoi(kv.second, &us) || us < 0) {
      return UsageError("inject-delay", absl::StrCat("expected STAGE:MICROSECONDS, got \"", item,
                                                     "\""));
    }
    auto stage = ParseStage(kv.first);
    if (!stage.ok() || *stage == Stage::kPinnedWait || *stage == Stage::kDelivery) {
      return UsageError("inject-delay", absl::StrCat("unknown stage \"", kv.first,
                                                     "\" (read, decompress, preprocess, h2d, compute)"));
    }
    if (*stage == Stage::kCompute) {
      o.inject_compute_delay_us = us;
    } else {
      o.pipeline.diagnostics.inject_delay_us[static_cast<int>(*stage)] = us;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainJobOptions> OptionsFromFlags() {
  TrainJobOptions o;
  RETURN_IF_ERROR(DataAndModelFromFlags(o));
  RETURN_IF_ERROR(OptimizerFromFlags(o.optimizer));
  RETURN_IF_ERROR(DeviceFromFlags(o));
  RETURN_IF_ERROR(PipelineFromFlags(o));
  RETURN_IF_ERROR(OutputsFromFlags(o));
  RETURN_IF_ERROR(DiagnosticsFromFlags(o));
  // The flags that define the run, recorded in checkpoints and the report.
  for (const auto* flag : {"lr", "optimizer", "momentum", "weight_decay", "layers", "batch_size",
                           "epochs", "seed", "shuffle", "h2d_format", "device", "precision"}) {
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    if (f != nullptr) o.run_config.emplace_back(flag, f->CurrentValue());
  }
  return o;
}

// A live line on a terminal, plain lines otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}
  void Step(const TrainProgress& p) {
    if (quiet_) return;
    std::string line = absl::StrFormat(
        "epoch %d step %d/%d  loss %.4f  %.0f samples/s  lr %.3g", p.epoch + 1, p.step_in_epoch,
        p.batches_per_epoch, p.loss, p.samples_per_second, p.lr);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else if (p.optimizer_steps % (plain_every_ * 1) == 0) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  void Epoch(const EpochSummary& s) {
    if (tty_ && !quiet_) std::fprintf(stderr, "\r\033[K");
    std::string line = absl::StrFormat(
        "epoch %d: train loss %.4f, train accuracy %.4f, %.0f samples/s, %.2fs", s.epoch + 1,
        s.train_loss, s.train_accuracy, s.samples_per_second, s.seconds);
    if (s.test) {
      absl::StrAppendFormat(&line, "; test loss %.4f, test accuracy %.4f",
                            s.test->samples ? s.test->loss_sum / s.test->samples : 0.0,
                            s.test->accuracy());
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  void set_plain_every(int64_t steps) { plain_every_ = steps > 0 ? steps : 1; }

 private:
  bool quiet_;
  bool tty_;
  int64_t plain_every_ = 1;
};

int Cores() { return UsableCores(); }

// The ceilings for the report, measured once per host and dataset and cached. A failure to
// measure is not fatal: the report then has no "% of ceiling" column.
std::optional<Ceilings> LoadCeilings(Env* env, const TrainJobOptions& o, const TrainJobResult& r) {
  if (!absl::GetFlag(FLAGS_ceilings)) return std::nullopt;
  auto dataset = Dataset::Open(env, r.train_manifest);
  if (!dataset.ok()) return std::nullopt;
  CeilingOptions c = CeilingOptionsFor(o);
  c.refresh = absl::GetFlag(FLAGS_refresh_ceilings);
  auto ceilings = Ceilings::LoadOrMeasure(env, **dataset, c);
  if (!ceilings.ok()) {
    std::fprintf(stderr, "sluice-train: ceilings not measured: %s\n",
                 std::string(ceilings.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(ceilings);
}

double SamplesPerSecond(const TrainResult& t) {
  return t.train_seconds > 0 ? t.samples / t.train_seconds : 0.0;
}

// Data parallel: what rank 0 needs from every rank for the report and the trace.
struct GatheredWorld {
  std::vector<RankSummary> ranks;         // index = rank
  AllReduceCeiling exchange_ceiling;
  std::vector<nlohmann::json> traces;     // with --trace, index = rank (rank 0 only)
};

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// The report's collectives: every rank calls this, in this order, after training and before
// rank 0 prints (a rank that skipped it would leave the others waiting).
absl::StatusOr<GatheredWorld> GatherWorld(dist::Communicator* world, const TrainJobResult& result,
                                          bool trace) {
  GatheredWorld g;
  const dist::ExchangeStats& x = result.run.exchange;
  ASSIGN_OR_RETURN(g.exchange_ceiling,
                   MeasureAllReduceCeiling(world, x.steps > 0 ? x.bytes / x.steps : 0));
  const BottleneckReport own = AnalyzeRun(result.run, nullptr, Cores());
  const RankSummary mine = SummarizeRank(result.run, own, HostName());
  ASSIGN_OR_RETURN(std::vector<std::string> all, world->AllGather(nlohmann::json(mine).dump()));
  ASSIGN_OR_RETURN(g.ranks, ParseRankSummaries(all));
  if (trace) {
    ASSIGN_OR_RETURN(std::vector<std::string> traces,
                     world->AllGather(BuildChromeTrace(result.run).dump()));
    if (world->rank() == 0) {
      for (const std::string& t : traces) g.traces.push_back(nlohmann::json::parse(t));
    }
  }
  return g;
}

// The frames one process decodes for this run: every frame once per epoch. Exact only for
// whole epochs from the start, with every sample trained and no frame skipped; otherwise
// unknown (nullopt).
std::optional<uint64_t> FramesOneProcess(Env* env, const TrainJobOptions& o,
                                         const TrainJobResult& r, const GatheredWorld& g) {
  if (r.resumed || r.train.interrupted || o.pipeline.order.drop_last) return std::nullopt;
  for (const RankSummary& s : g.ranks) {
    if (s.skipped_frames > 0) return std::nullopt;
  }
  auto dataset = Dataset::Open(env, r.train_manifest);
  if (!dataset.ok()) return std::nullopt;
  uint64_t frames = 0;
  for (const ShardEntry& e : (*dataset)->manifest().shards) frames += e.frame_count;
  return frames * r.train.epochs.size();
}

// --what-if=all: the normal run, then each stage made free in turn, in one table.
absl::Status RunWhatIfTable(Env* env, const TrainJobOptions& base, const TrainJobResult& normal,
                            const BottleneckReport& report) {
  struct Row {
    std::string mode;
    std::string note;
    double samples_per_s = 0;
  };
  std::vector<Row> rows = {{"normal", "", SamplesPerSecond(normal.train)}};
  const std::vector<std::pair<std::string, WhatIf>> modes = {
      {"read", WhatIf::kRead}, {"decompress", WhatIf::kDecompress},
      {"preprocess", WhatIf::kPreprocess}, {"h2d", WhatIf::kH2D}, {"compute", WhatIf::kNone}};
  for (const auto& [name, mode] : modes) {
    if (name == "h2d" && !normal.run.compute.on_device) {
      rows.push_back({name, "n/a: the CPU backend copies nothing", 0});
      continue;
    }
    TrainJobOptions o = base;
    o.pipeline.diagnostics.what_if = mode;
    o.compute_free = name == "compute";
    o.evaluate = false;
    o.checkpoint_dir.clear();
    o.resume.clear();
    o.export_safetensors.clear();
    o.metrics_out.clear();
    o.pipeline.diagnostics.trace_capacity = 0;
    o.on_progress = nullptr;
    o.on_epoch_end = nullptr;
    o.on_report = nullptr;
    std::fprintf(stderr, "what-if: %s free ...\n", name.c_str());
    ASSIGN_OR_RETURN(TrainJobResult r, RunTrainJob(env, o));
    rows.push_back({name, "", SamplesPerSecond(r.train)});
  }
  std::printf("\nwhat-if (each stage made free in turn; the stage whose removal speeds the run "
              "up most is the limit):\n");
  std::printf("  %-12s %14s %9s\n", "free stage", "samples/s", "speedup");
  for (const Row& row : rows) {
    if (!row.note.empty()) {
      std::printf("  %-12s %14s %9s  %s\n", row.mode.c_str(), "-", "-", row.note.c_str());
    } else {
      std::printf("  %-12s %14.0f %8.2fx\n", row.mode.c_str(), row.samples_per_s,
                  rows[0].samples_per_s > 0 ? row.samples_per_s / rows[0].samples_per_s : 0.0);
    }
  }
  std::printf("  report verdict for the normal run: %s\n", report.sentence.c_str());
  return absl::OkStatus();
}

// SIGINT / SIGTERM: the handler only records the signal and sets the flag the Trainer polls
// between steps; SA_RESETHAND restores the default action, so a second signal ends the process
// at once.
std::atomic<bool> g_stop_requested{false};
volatile std::sig_atomic_t g_stop_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void OnStopSignal(int sig) {
  g_stop_signal = sig;
  g_stop_requested.store(true, std::memory_order_relaxed);
  static const char kMessage[] =
      "\nsluice-train: stopping after the current step (signal again to abort at once)\n";
  // write(2) is async-signal-safe; its result does not matter here.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// The command line that resumes this run: the same arguments, --resume replaced.
std::string ResumeCommand(const std::vector<std::string>& argv, const std::string& checkpoint) {
  auto quote = [](const std::string& a) {
    if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-+=.,/:@%") == std::string::npos) {
      return a;
    }
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--resume" || a == "-resume") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--resume=", 0) == 0 || a.rfind("-resume=", 0) == 0) continue;
    out.push_back(quote(a));
  }
  out.push_back(quote("--resume=" + checkpoint));
  return absl::StrJoin(out, " ");
}

// Runs the job; the exit code is 0, or 128 + the signal that stopped it.
absl::StatusOr<int> Run(TrainJobOptions options, const std::vector<std::string>& argv,
                        dist::Communicator* world) {
  InstallStopHandlers();
  options.stop_requested = &g_stop_requested;
  options.comm = world;
  // In a data-parallel run rank 0 speaks for the job; the others print only their errors.
  const bool rank_zero = world->rank() == 0;
  ProgressPrinter printer(absl::GetFlag(FLAGS_quiet) || !rank_zero);
  const int64_t every = absl::GetFlag(FLAGS_progress_every);
  // On a terminal the live line is redrawn every `every` steps; in logs, a plain line every
  // 10x that many.
  printer.set_plain_every(every * 10);
  options.progress_every_steps = every;
  options.on_progress = [&printer](const TrainProgress& p) { printer.Step(p); };
  if (rank_zero) options.on_epoch_end = [&printer](const EpochSummary& s) { printer.Epoch(s); };
  options.on_autotune = [](const std::vector<std::string>& reasons) {
    for (const std::string& r : reasons) std::printf("autotune: %s\n", r.c_str());
    std::fflush(stdout);
  };
  if (options.report_every_steps > 0) {
    options.on_report = [](const RunRecord& partial) {
      BottleneckReport r = AnalyzeRun(partial, nullptr, Cores());
      std::fprintf(stderr, "\r\033[Kreport after %d steps: %.0f samples/s; %s\n",
                   static_cast<int>(partial.compute.steps), r.measured_samples_per_s,
                   r.sentence.c_str());
    };
  }
  Env* env = Env::Default();
  const bool what_if_all = absl::GetFlag(FLAGS_what_if) == "all";
  // The outputs written after training are checked before it (the job checks its own). Rank 0
  // alone writes the report and the trace, so it alone probes them (ranks probing one path at
  // once would race on the probe file).
  if (const std::string path = absl::GetFlag(FLAGS_report_json); !path.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, path, "report-json"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, path, "trace"));
  }
  ASSIGN_OR_RETURN(TrainJobResult result, RunTrainJob(env, options));
  const TrainResult& t = result.train;
  const int stop_signal = g_stop_signal;
  std::optional<GatheredWorld> gathered;
  if (world->is_distributed()) {
    ASSIGN_OR_RETURN(gathered, GatherWorld(world, result, !absl::GetFlag(FLAGS_trace).empty()));
  }
  if (!rank_zero) return stop_signal != 0 ? 128 + stop_signal : 0;
  if (t.interrupted) {
    std::fflush(stdout);
    std::fprintf(stderr, "\r\033[Ksluice-train: interrupted by %s after epoch %llu step %llu "
                 "(%lld optimizer steps)\n", stop_signal == SIGTERM ? "SIGTERM" : "SIGINT",
                 static_cast<unsigned long long>(t.stopped_epoch + 1),
                 static_cast<unsigned long long>(t.stopped_step),
                 static_cast<long long>(t.optimizer_steps));
    if (!result.checkpoint_path.empty()) {
      std::fprintf(stderr, "sluice-train: checkpoint written: %s\nresume with: %s\n",
                   result.checkpoint_path.c_str(),
                   ResumeCommand(argv, result.checkpoint_path).c_str());
    } else {
      std::fprintf(stderr, "sluice-train: no checkpoint was written (no --checkpoint-dir); "
                   "this run cannot be resumed\n");
    }
  }
  if (world->is_distributed()) {
    // Every rank trained its slice: the job's samples are the epochs' sums over the ranks
    // (TrainResult::samples is this rank's).
    int64_t job_samples = 0;
    for (const EpochSummary& e : t.epochs) job_samples += e.train_samples;
    std::printf("\nsluice-train: %d ranks (%s), %lld samples in %.2fs of training (%.0f "
                "samples/s over all ranks); rank 0 trained %lld on %s\n",
                world->size(), world->description().c_str(),
                static_cast<long long>(job_samples), t.train_seconds,
                t.train_seconds > 0 ? job_samples / t.train_seconds : 0.0,
                static_cast<long long>(t.samples), result.run.device.c_str());
  } else {
  std::printf("\nsluice-train: %s, %lld samples in %.2fs of training (%.0f samples/s), "
              "%.2fs wall\n", result.run.device.c_str(), static_cast<long long>(t.samples),
              t.train_seconds,
              SamplesPerSecond(t), t.seconds);
  }
  if (result.resumed) {
    std::printf("resumed at epoch %llu step %llu (%llu samples trained before)\n",
                static_cast<unsigned long long>(result.resumed_epoch + 1),
                static_cast<unsigned long long>(result.resumed_step),
                static_cast<unsigned long long>(result.resumed_samples));
  }
  if (!t.epochs.empty() && t.epochs.back().test) {
    std::printf("final test accuracy: %.4f (%lld samples)\n", t.epochs.back().test->accuracy(),
                static_cast<long long>(t.epochs.back().test->samples));
  }
  if (!result.not_evaluated.empty()) {
    std::printf("nothing was evaluated: %s\n", result.not_evaluated.c_str());
  }
  const PipelineStats& ps = result.run.pipeline;
  if (ps.skipped_frames > 0) {
    std::printf("skipped in the train split: %llu corrupt frames (%llu records); first: %s\n",
                static_cast<unsigned long long>(ps.skipped_frames),
                static_cast<unsigned long long>(ps.skipped_records),
                ps.corrupt_frames.empty() ? "-" : ps.corrupt_frames.front().c_str());
  }
  if (result.run.test_skipped_frames > 0) {
    std::printf("skipped in the test split: %llu corrupt frames (%llu records); first: %s\n",
                static_cast<unsigned long long>(result.run.test_skipped_frames),
                static_cast<unsigned long long>(result.run.test_skipped_records),
                result.run.test_corrupt_frames.empty()
                    ? "-"
                    : result.run.test_corrupt_frames.front().c_str());
  }
  if (options.pipeline.diagnostics.what_if != WhatIf::kNone || options.compute_free) {
    std::printf("what-if: %s was free in this run\n", absl::GetFlag(FLAGS_what_if).c_str());
  }
  if (!result.checkpoint_path.empty()) std::printf("checkpoint: %s\n", result.checkpoint_path.c_str());
  if (!options.export_safetensors.empty()) {
    std::printf("safetensors: %s\n", options.export_safetensors.c_str());
  }
  std::optional<Ceilings> ceilings = LoadCeilings(env, options, result);
  BottleneckReport report = AnalyzeRun(result.run, ceilings ? &*ceilings : nullptr, Cores());
  if (gathered) {
    AddWorldFigures(gathered->ranks, gathered->exchange_ceiling,
                    FramesOneProcess(env, options, result, *gathered), &report);
  }
  if (absl::GetFlag(FLAGS_report)) std::printf("\n%s", report.ToText().c_str());
  if (const std::string path = absl::GetFlag(FLAGS_report_json); !path.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(env, path, report.ToJson().dump(2) + "\n"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty()) {
    if (gathered) {
      // One process per rank; one host shares one steady clock, so the ranks line up in time.
      bool one_host = true;
      for (const RankSummary& r : gathered->ranks) {
        one_host &= r.hostname == gathered->ranks[0].hostname;
      }
      RETURN_IF_ERROR(WriteFileAtomically(
          env, path, MergeRankTraces(gathered->traces, one_host).dump() + "\n"));
    } else {
      RETURN_IF_ERROR(WriteChromeTrace(env, path, result.run));
    }
    std::printf("trace: %s (open in ui.perfetto.dev or chrome://tracing)\n", path.c_str());
  }
  std::fflush(stdout);
  if (what_if_all && !t.interrupted) RETURN_IF_ERROR(RunWhatIfTable(env, options, result, report));
  return stop_signal != 0 ? 128 + stop_signal : 0;
}

// What --help says; --helpfull lists every flag.
ToolDescription TrainTool() {
  return {
      .name = "sluice-train",
      .usage =
          "trains an MLP from a sluice shard dataset.\n"
          "  sluice-train --data DIR [--epochs 10] [--batch-size 32] [--lr 0.01] "
          "[--device auto]\n"
          "Exit codes: 0 ok, 1 runtime or data error, 2 usage error, 130/143 stopped by "
          "SIGINT/SIGTERM.",
      .source_name = "sluice_train",
      .main_flags = {"data", "test_data", "epochs", "batch_size", "lr", "optimizer", "layers",
                     "device", "threads", "shuffle", "checkpoint_dir", "checkpoint_every", "resume",
                     "metrics_out", "export_safetensors", "report_json", "trace", "quiet"}};
}

int ReportUsageError(absl::string_view message) {
  std::fprintf(stderr, "sluice-train: %s\n", std::string(message).c_str());
  return 2;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolCommandLine> command_line = ParseToolCommandLine(TrainTool(), argc, argv);
  if (!command_line.ok()) return ReportUsageError(command_line.status().message());
  if (command_line->help_printed) return 0;
  if (!command_line->positional.empty()) {
    return ReportUsageError(absl::StrCat("unexpected argument \"", command_line->positional[0],
                                         "\" (flags are --name=value)"));
  }
  auto options = OptionsFromFlags();
  if (!options.ok()) return ReportUsageError(options.status().message());
  // Under mpirun/srun: join the job's world (a single process otherwise).
  absl::StatusOr<std::unique_ptr<dist::Communicator>> world = dist::InitWorld(nullptr, nullptr);
  if (!world.ok()) {
    std::fprintf(stderr, "sluice-train: %s\n", std::string(world.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<int> exit_code = Run(*std::move(options), command_line->args, world->get());
  if (!exit_code.ok()) {
    std::fflush(stdout);
    if ((*world)->is_distributed()) {
      // One rank's error ends the whole job at once: the others would wait for it forever in
      // the next exchange. MPI_Abort makes the launcher stop every rank (exit code 1).
      std::fprintf(stderr, "sluice-train: rank %d of %d: %s\n", (*world)->rank(),
                   (*world)->size(), std::string(exit_code.status().message()).c_str());
      std::fflush(nullptr);
      (*world)->Abort(1);
    }
    std::fprintf(stderr, "sluice-train: %s\n", std::string(exit_code.status().message()).c_str());
    return 1;
  }
  world->reset();  // MPI_Finalize after every rank is done
  return *exit_code;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // A last resort: every failure should already be a Status; an exception that still escapes
  // (bad_alloc, length_error) ends with one line and exit code 1, not std::terminate.
  int code = 1;
  try {
    code = sluice::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "sluice-train: error: %s (unexpected exception; please report it)\n",
                 e.what());
  }
  if (code == 0) return 0;
  // A failed run leaves without the library exit handlers: OpenBLAS's joins its worker
  // threads, and under an address-space limit a worker can be stuck retrying its buffer
  // allocation forever (seen with the CUDA libraries mapped: the message printed, then a
  // hang). Everything the run wrote went through the Env and is closed; flush stdio and go.
  std::fflush(nullptr);
  std::_Exit(code);
}
