// sluice-train's flags, and the job options they make (OptionsFromFlags). Every bad value is
// a usage error (kInvalidArgument naming the flag and the range; exit code 2). The bounds are
// those of docs/limits.md.
#include <climits>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "device/device.h"
#include "pipeline/pipeline.h"
#include "pipeline/resource_limits.h"
#include "pipeline/transforms/transform_spec.h"
#include "report/stages.h"
#include "storage/remote/remote_env.h"
#include "tools/sluice_train_flags.h"

namespace {

// The help of the flags that name stages: the stages come from kStageTable
// (report/stages.h), so the text lists what the flag accepts.
std::string InjectDelayHelp() {
  return absl::StrCat(
      "Diagnostic: STAGE:MICROSECONDS[,...] busy-waits that long per item in a stage (",
      sluice::StageNamesWith(&sluice::StageInfo::inject_delay, ", "),
      "; decode: per image; up to 10000000 us); see docs/bottleneck.md");
}

std::string WhatIfHelp() {
  return absl::StrCat(
      "Diagnostic: make one stage free and report the throughput: ",
      sluice::StageNamesWith(&sluice::StageInfo::what_if, " | "),
      " (transforms: the --transforms chain's cost alone; decode: encoded images, each decode "
      "replaced by a cached decoded image) | all (a table with each stage removed in turn next "
      "to the normal run)");
}

}  // namespace

ABSL_FLAG(std::string, data, "",
          "Training split: a shard dataset directory, a manifest, or a "
          "directory of IDX files (sharded once into --cache-dir)");
ABSL_FLAG(std::string, test_data, "",
          "Evaluation split; default: the dataset's sibling 'test' "
          "split (or the t10k IDX files beside the train files)");
ABSL_FLAG(bool, evaluate, true, "Evaluate on the test split after each epoch");
ABSL_FLAG(std::string, cache_dir, "",
          "Where IDX input is sharded and remote datasets' frames are cached (default "
          "~/.cache/sluice)");
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
ABSL_FLAG(bool, fused_sgd, true,
          "CPU and sim: plain SGD steps each weight inside its gradient's sgemm; false stores "
          "the gradient, then steps, as --exchange-always does (compare the two bitwise only "
          "with this off: docs/distributed.md)");
ABSL_FLAG(uint64_t, seed, 0, "Seed of initialization and shuffle");
ABSL_FLAG(bool, shuffle, false, "Shuffle (off: file order, as the reference DataLoader)");
ABSL_FLAG(int64_t, shuffle_window, 64,
          "Frames per shuffle window (0: all frames; at most "
          "1048576)");
ABSL_FLAG(bool, drop_last, false, "Drop a short last batch");
ABSL_FLAG(std::string, h2d_format, "auto",
          "What crosses PCIe: u8 | f16 | f32 | auto (u8 on "
          "CUDA, f32 on the CPU)");
ABSL_FLAG(std::string, normalize_mean, "0",
          "Normalization (x/255 - mean[c])/std[c]: one value, or one per channel (0.49,0.48,0.45)");
ABSL_FLAG(std::string, normalize_std, "1",
          "Normalization (x/255 - mean[c])/std[c]: one value, or one per channel (0.25,0.24,0.26)");
ABSL_FLAG(std::string, transforms, "",
          "Ops applied to each training sample, torchvision's names and arguments, e.g. "
          "'RandomCrop(32, padding=4), RandomHorizontalFlip()' (docs/transforms.md)");
ABSL_FLAG(std::string, eval_transforms, "",
          "Ops applied to each test sample when evaluating; empty: --transforms with each random "
          "op made deterministic (RandomResizedCrop(S): Resize(S/0.875), CenterCrop(S); "
          "RandomCrop(S): CenterCrop(S); flips dropped), as torchvision's recipes evaluate "
          "(docs/transforms.md, \"Evaluation\")");
ABSL_FLAG(int64_t, threads, 0, "Pipeline threads (0: all cores; at most 4 x hardware threads)");
ABSL_FLAG(int64_t, decompress_threads, 0,
          "Decompress concurrency (0: --threads; at most 4 x "
          "hardware threads)");
ABSL_FLAG(int64_t, preprocess_threads, 0,
          "Preprocess concurrency (0: --threads; at most 4 x "
          "hardware threads)");
ABSL_FLAG(int64_t, compute_threads, 0,
          "CPU backend: threads each batch is split across (0: the cores the pipeline does not "
          "need, engine/job/train_job.h; at most 4 x hardware threads)");
ABSL_FLAG(
    int64_t, pool_size, 0,
    "Pinned batch buffers (0: enough for 4096 samples, at most 128 MiB of them and an epoch's "
    "batches, over several epochs a quarter of an epoch's (at least 2 per preprocess "
    "thread), 4..256; at most 1024)");
ABSL_FLAG(int64_t, read_ahead, 4, "Frames read ahead (at most 1024)");
ABSL_FLAG(int64_t, read_concurrency, 0,
          "Remote datasets (s3://, https://, http://): byte ranges fetched at once, 1 to 256; "
          "0: tuned while reading (docs/storage.md)");
ABSL_FLAG(std::string, cache_bytes, "16G",
          "Remote datasets: the bound of the local cache of fetched frames under --cache-dir "
          "(bytes, or with a K/M/G/T suffix; 0: no cache)");
ABSL_FLAG(int64_t, device_ring_depth, sluice::kDefaultDeviceRingDepth,
          "Device batch slots uploads may fill ahead of compute (--device cuda/sim; 2..64)");
ABSL_FLAG(std::string, on_corrupt, "fail", "fail | skip (skip corrupt frames, count them)");
ABSL_FLAG(double, max_corrupt_fraction, 0.01,
          "--on-corrupt=skip: fail once more than this "
          "fraction of the records read in a split were skipped as corrupt (0..1)");
ABSL_FLAG(std::string, checkpoint_dir, "", "Write checkpoints here");
ABSL_FLAG(int64_t, checkpoint_every, 0, "Checkpoint every N steps (0: at the end only)");
ABSL_FLAG(std::string, resume, "",
          "Resume from this checkpoint file, or 'auto' (the "
          "--checkpoint-dir checkpoint when present)");
ABSL_FLAG(std::string, export_safetensors, "", "Export the trained weights (PyTorch names)");
ABSL_FLAG(std::string, metrics_out, "", "JSON lines, one per epoch");
ABSL_FLAG(std::string, record_order, "",
          "write each trained step's record ids (\"epoch step id ...\") to this file, to audit "
          "the sample order; under mpirun each rank writes FILE.rank<R>");
ABSL_FLAG(int64_t, progress_every, 200, "Steps between progress updates");
ABSL_FLAG(double, collective_timeout_s, 300,
          "Under mpirun/srun: a rank that waits longer than this in one collective ends the job, "
          "naming the ranks that did not arrive and the step (1..86400 s)");
ABSL_FLAG(bool, quiet, false, "No progress lines");
ABSL_FLAG(int64_t, stop_after_steps, 0, "Testing: stop (as if killed) after N steps (0: never)");
ABSL_FLAG(std::string, inject_delay, "", InjectDelayHelp());

ABSL_FLAG(bool, report, true, "Print the bottleneck report at the end");
ABSL_FLAG(std::string, report_json, "",
          "Write the bottleneck report as JSON (docs/report-schema.md); - for stdout, which "
          "then holds the JSON alone (the rest goes to stderr)");
ABSL_FLAG(std::string, report_html, "",
          "Write the bottleneck report as one self-contained HTML page (the chain of stages, "
          "the limit, the what-if table, the rate per epoch, a wait/compute timeline)");
ABSL_FLAG(int64_t, report_every, 0, "Also print a short report every N steps (0: only at the end)");
ABSL_FLAG(std::string, trace, "",
          "Write a Chrome/Perfetto trace of the pipeline stages and "
          "compute (open in ui.perfetto.dev or chrome://tracing)");
ABSL_FLAG(int64_t, trace_spans, 2000000, "Most spans kept for --trace (at most 50000000)");
ABSL_FLAG(bool, ceilings, true,
          "Measure (once per host and dataset, cached) each stage's "
          "ceiling for the report");
ABSL_FLAG(bool, refresh_ceilings, false, "Measure the ceilings again instead of using the cache");
ABSL_FLAG(bool, check_advice, false,
          "After the report, run each change it suggests as an experiment: the job again over a "
          "bounded span as it was and with the change, and print both rates");
ABSL_FLAG(std::string, what_if, "none", WhatIfHelp());

ABSL_FLAG(bool, autotune, false,
          "After the first epoch, adjust stage concurrency, pool size, device ring depth "
          "and read-ahead from the measured statistics and say what changed and why");
ABSL_FLAG(int64_t, autotune_memory_mb, 256,
          "--autotune: most MiB of pinned batch buffers, and of device ring slots "
          "(at most 65536)");

namespace sluice {
namespace {

// Documented maxima of the concurrency and buffer flags (docs/limits.md); thread counts are
// bounded by MaxThreads() (4 x hardware threads).
constexpr int64_t kMaxBatchSize = INT32_MAX;    // backends index a batch with int
constexpr int64_t kMaxShuffleWindow = 1 << 20;  // frames; 0 already means the whole split
constexpr int64_t kMaxTraceSpans = 50000000;    // about 2.4 GiB of spans
constexpr int64_t kMaxAutotuneMemoryMb = 65536;
constexpr int64_t kMaxInjectDelayUs = 10000000;  // 10 s per item, as --sim-compute-us

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

// A comma-separated list of finite values, each in [lo, hi] (the channels' means or stds).
absl::StatusOr<std::vector<float>> ChannelValues(absl::string_view flag, absl::string_view text,
                                                 double lo, double hi) {
  std::vector<float> values;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v)) {
      return UsageError(
          flag, absl::StrCat("'", Printable(item), "' is not a number (expected one value, ",
                             "or one per channel separated by commas)"));
    }
    ASSIGN_OR_RETURN(v, InRange(flag, v, lo, hi));
    values.push_back(static_cast<float>(v));
  }
  return values;
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
    ASSIGN_OR_RETURN(opt.warmup_steps,
                     Positive<int64_t>("warmup-steps", absl::GetFlag(FLAGS_warmup_steps), true));
  }

  return absl::OkStatus();
}

// --device, --precision, --cuda-graph, --compute-threads, --seed.
absl::Status DeviceFromFlags(TrainJobOptions& o) {
  auto device = device::ParseDeviceSpec(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return UsageError("device", device.status().message());
  o.backend.device = *device;
  SimBackendOptions& sim = o.backend.sim;
  // Bounds keep a modelled step or copy within seconds, so a run ends and a signal is
  // answered after the current step (docs/limits.md).
  const double gbps = absl::GetFlag(FLAGS_sim_link_gbps);
  RETURN_IF_ERROR(CheckInRange("sim-link-gbps", gbps, 1e-3, 1e5, "GB/s: 1 MB/s to 100 TB/s"));
  sim.device.link_bytes_per_s = gbps * 1e9;
  const double latency_us = absl::GetFlag(FLAGS_sim_latency_us);
  RETURN_IF_ERROR(CheckInRange("sim-latency-us", latency_us, 0, 1e6, "microseconds: up to 1 s"));
  sim.device.link_latency_ns = static_cast<int64_t>(latency_us * 1e3);
  const double compute_us = absl::GetFlag(FLAGS_sim_compute_us);
  RETURN_IF_ERROR(
      CheckInRange("sim-compute-us", compute_us, 0, 1e7, "microseconds per step: up to 10 s"));
  sim.compute_ns_per_step = static_cast<int64_t>(compute_us * 1e3);
  const double rate = absl::GetFlag(FLAGS_sim_compute_samples_per_s);
  const double batch = static_cast<double>(absl::GetFlag(FLAGS_batch_size));
  RETURN_IF_ERROR(CheckInRange("sim-compute-samples-per-s", rate, 0, 1e15, "samples/s; 0: off"));
  if (rate > 0 && batch / rate > 10) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--sim-compute-samples-per-s: %g models %g s per step of %g samples, more than the "
        "maximum 10 s",
        rate, batch / rate, batch));
  }
  sim.compute_samples_per_s = rate;
  sim.device.poison = absl::GetFlag(FLAGS_sim_poison);
  sim.device.jitter_seed = absl::GetFlag(FLAGS_sim_jitter_seed);
  auto precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return UsageError("precision", precision.status().message());
  o.backend.options.precision = *precision;
  o.backend.cuda.cuda_graph = absl::GetFlag(FLAGS_cuda_graph);
  o.backend.options.exchange_in_world_of_one = absl::GetFlag(FLAGS_exchange_always);
  o.backend.cpu.fused_sgd = absl::GetFlag(FLAGS_fused_sgd);
  RETURN_IF_ERROR(CheckThreadCount("compute-threads", absl::GetFlag(FLAGS_compute_threads)));
  ASSIGN_OR_RETURN(o.backend.cpu.threads,
                   Positive<int>("compute-threads", absl::GetFlag(FLAGS_compute_threads), true));
  o.pipeline.order.seed = absl::GetFlag(FLAGS_seed);

  return absl::OkStatus();
}

// The pipeline: order, batch format, resources, corruption policy. Needs o.backend.device
// (the automatic h2d format depends on it).
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
    const bool cuda = o.backend.device.Resolve().platform == device::Platform::kCuda;
    p.format.h2d_format = cuda ? H2DFormat::kU8 : H2DFormat::kF32;
    p.format.h2d_auto = true;  // a chain that outputs floats picks its own format
  } else {
    auto format = ParseH2DFormat(h2d);
    if (!format.ok()) return UsageError("h2d-format", format.status().message());
    p.format.h2d_format = *format;
  }
  // The chain is parsed here, once (a typo is a usage error, exit 2), and the job carries the
  // ops; it is checked against the samples when the data is opened (CheckTrainable; a misfit
  // is exit 1).
  absl::StatusOr<TransformSpec> transforms = TransformSpec::Parse(absl::GetFlag(FLAGS_transforms));
  if (!transforms.ok()) return UsageError("transforms", transforms.status().message());
  p.format.transforms = *std::move(transforms);
  if (const std::string eval = absl::GetFlag(FLAGS_eval_transforms); !eval.empty()) {
    absl::StatusOr<TransformSpec> spec = TransformSpec::Parse(eval);
    if (!spec.ok()) return UsageError("eval-transforms", spec.status().message());
    o.eval_transforms = *std::move(spec);
  }
  // Their count against the samples' channels is checked when the pipeline starts.
  ASSIGN_OR_RETURN(p.format.normalization.mean,
                   ChannelValues("normalize-mean", absl::GetFlag(FLAGS_normalize_mean), -10, 10));
  ASSIGN_OR_RETURN(p.format.normalization.std,
                   ChannelValues("normalize-std", absl::GetFlag(FLAGS_normalize_std), 1e-6, 1e3));
  // The bounds sluice.Loader applies too (pipeline/resource_limits.h).
  RETURN_IF_ERROR(CheckResourceSettings(
      ResourceSettings{absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_decompress_threads),
                       absl::GetFlag(FLAGS_preprocess_threads), absl::GetFlag(FLAGS_pool_size),
                       absl::GetFlag(FLAGS_read_ahead), absl::GetFlag(FLAGS_device_ring_depth)},
      SettingNames::kFlags));
  ASSIGN_OR_RETURN(p.resources.threads,
                   Positive<int>("threads", absl::GetFlag(FLAGS_threads), true));
  ASSIGN_OR_RETURN(
      p.resources.decompress_threads,
      Positive<int>("decompress-threads", absl::GetFlag(FLAGS_decompress_threads), true));
  ASSIGN_OR_RETURN(
      p.resources.preprocess_threads,
      Positive<int>("preprocess-threads", absl::GetFlag(FLAGS_preprocess_threads), true));
  ASSIGN_OR_RETURN(p.resources.pool_size,
                   Positive<uint32_t>("pool-size", absl::GetFlag(FLAGS_pool_size), true));
  if (p.resources.pool_size == 1) return UsageError("pool-size", "must be 0 (auto) or >= 2");
  ASSIGN_OR_RETURN(p.resources.read_ahead_frames,
                   Positive<uint32_t>("read-ahead", absl::GetFlag(FLAGS_read_ahead), true));
  p.resources.device_ring_depth = static_cast<uint32_t>(absl::GetFlag(FLAGS_device_ring_depth));
  ASSIGN_OR_RETURN(const int64_t concurrency,
                   InRange("read-concurrency", absl::GetFlag(FLAGS_read_concurrency), 0,
                           remote::kMaxReadConcurrency));
  p.resources.read_concurrency = static_cast<uint32_t>(concurrency);
  auto on_corrupt = ParseOnCorrupt(absl::GetFlag(FLAGS_on_corrupt));
  if (!on_corrupt.ok()) return UsageError("on-corrupt", on_corrupt.status().message());
  p.on_corrupt = *on_corrupt;
  ASSIGN_OR_RETURN(
      o.max_corrupt_fraction,
      InRange("max-corrupt-fraction", absl::GetFlag(FLAGS_max_corrupt_fraction), 0, 1));

  return absl::OkStatus();
}

// Checkpoints, resume, export, metrics.
absl::Status OutputsFromFlags(TrainJobOptions& o) {
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  ASSIGN_OR_RETURN(
      o.checkpoint_every,
      Positive<int64_t>("checkpoint-every", absl::GetFlag(FLAGS_checkpoint_every), true));
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
  const int64_t stop_after = absl::GetFlag(FLAGS_stop_after_steps);
  if (stop_after < 0) {
    return UsageError("stop-after-steps",
                      absl::StrCat("must be >= 0 (0: never), got ", stop_after));
  }
  o.stop_after_steps = stop_after == 0 ? -1 : stop_after;
  // A checkpoint written or a test split evaluated while the others wait must fit in it.
  RETURN_IF_ERROR(CheckInRange("collective-timeout-s", absl::GetFlag(FLAGS_collective_timeout_s), 1,
                               86400, "seconds: 1 s to 1 day"));
  return absl::OkStatus();
}

// --trace, --report-every, --what-if, --autotune, --inject-delay.
absl::Status DiagnosticsFromFlags(TrainJobOptions& o) {
  // Bounded with or without --trace: a value that would be refused is never silently ignored.
  RETURN_IF_ERROR(CheckAtMost("trace-spans", absl::GetFlag(FLAGS_trace_spans), kMaxTraceSpans,
                              "spans kept in memory"));
  ASSIGN_OR_RETURN(const size_t trace_spans,
                   Positive<size_t>("trace-spans", absl::GetFlag(FLAGS_trace_spans)));
  if (!absl::GetFlag(FLAGS_trace).empty()) o.pipeline.diagnostics.trace_capacity = trace_spans;
  ASSIGN_OR_RETURN(o.report_every_steps,
                   Positive<int64_t>("report-every", absl::GetFlag(FLAGS_report_every), true));
  const std::string what_if = absl::GetFlag(FLAGS_what_if);
  if (what_if != "all" && what_if != "none") {
    auto w = ParseStageWith(what_if, &StageInfo::what_if);
    if (!w.ok()) {
      return UsageError("what-if",
                        absl::StrCat("expected none, ", StageNamesWith(&StageInfo::what_if, ", "),
                                     " or all, got ", QuotedPrintable(what_if)));
    }
    o.compute_free = *w == Stage::kCompute;
    if (!o.compute_free) o.pipeline.diagnostics.what_if = *w;
  }
  o.autotune = absl::GetFlag(FLAGS_autotune);
  RETURN_IF_ERROR(CheckAtMost("autotune-memory-mb", absl::GetFlag(FLAGS_autotune_memory_mb),
                              kMaxAutotuneMemoryMb, "MiB of batch buffers"));
  ASSIGN_OR_RETURN(
      const int64_t autotune_mb,
      Positive<int64_t>("autotune-memory-mb", absl::GetFlag(FLAGS_autotune_memory_mb)));
  o.autotune_memory_bytes = static_cast<uint64_t>(autotune_mb) << 20;
  for (absl::string_view item :
       absl::StrSplit(absl::GetFlag(FLAGS_inject_delay), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits(':', 1));
    int64_t us = 0;
    if (!absl::SimpleAtoi(kv.second, &us) || us < 0) {
      return UsageError("inject-delay",
                        absl::StrCat("expected STAGE:MICROSECONDS, got ", QuotedPrintable(item)));
    }
    // As the simulated device's step: a delay ends within seconds, so a run does.
    if (us > kMaxInjectDelayUs) {
      return UsageError("inject-delay", absl::StrCat(us, " microseconds in ", QuotedPrintable(item),
                                                     " is more than the maximum ",
                                                     kMaxInjectDelayUs, " (10 s per item)"));
    }
    auto stage = ParseStageWith(kv.first, &StageInfo::inject_delay);
    if (!stage.ok()) {
      return UsageError("inject-delay",
                        absl::StrCat("unknown stage ", QuotedPrintable(kv.first), " (",
                                     StageNamesWith(&StageInfo::inject_delay, ", "), ")"));
    }
    if (*stage == Stage::kCompute) {
      o.inject_compute_delay_us = us;
    } else {
      o.pipeline.diagnostics.inject_delay_us[static_cast<int>(*stage)] = us;
    }
  }
  return absl::OkStatus();
}

// --read-concurrency, --cache-dir, --cache-bytes: how remote datasets are read
// (storage/remote/remote_env.h).
absl::Status RemoteFromFlags(const TrainJobOptions& o) {
  remote::RemoteOptions r;
  r.cache_dir = o.cache_dir;
  absl::StatusOr<uint64_t> bytes = remote::ParseByteCount(absl::GetFlag(FLAGS_cache_bytes));
  if (!bytes.ok()) return UsageError("cache-bytes", bytes.status().message());
  r.cache_bytes = *bytes;
  remote::ConfigureRemote(r);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainJobOptions> OptionsFromFlags() {
  TrainJobOptions o;
  RETURN_IF_ERROR(DataAndModelFromFlags(o));
  RETURN_IF_ERROR(OptimizerFromFlags(o.optimizer));
  RETURN_IF_ERROR(DeviceFromFlags(o));
  RETURN_IF_ERROR(PipelineFromFlags(o));
  RETURN_IF_ERROR(OutputsFromFlags(o));
  RETURN_IF_ERROR(DiagnosticsFromFlags(o));
  RETURN_IF_ERROR(RemoteFromFlags(o));
  // The flags that define the run, recorded in checkpoints and the report.
  for (const auto* flag :
       {"lr", "optimizer", "momentum", "weight_decay", "layers", "batch_size", "epochs", "seed",
        "shuffle", "h2d_format", "device", "precision", "transforms", "eval_transforms"}) {
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
    if (f != nullptr) o.run_config.emplace_back(flag, f->CurrentValue());
  }
  return o;
}

}  // namespace sluice
