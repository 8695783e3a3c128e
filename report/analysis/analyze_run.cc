#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "report/analysis/bottleneck_report.h"
#include "report/decide/decide.h"
#include "report/format.h"

namespace sluice {
namespace {

constexpr double kCpuSaturated = 0.9;  // of the cores
// Other processes' use of the cores from which a note names it.
constexpr double kOtherCoresNoted = 0.2;
// A span shorter than this is noted as one whose figures swing between identical passes.
constexpr double kShortSpanSeconds = 1.0;
// A stage that built this share of its samples outside the span gets the work-ahead note.
constexpr double kWorkAheadNotedPct = 5;
// A Python step is noted for running a team of threads only when its CPU time is this share
// of the run's wall clock or more.
constexpr double kStepNotedShare = 0.05;
// A remote read whose responses were arriving this share of the time one was in flight is
// bandwidth-bound (measured: 0.99 behind a 10 MB/s cap, 0.01 behind 20 ms of latency).
constexpr double kBandwidthBoundReceiving = 0.9;

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }
// A share of the span: device events and the host clock that bound the span can differ by a
// few microseconds, so a share computed from both is held to [0, 100].
double Share(double part, double whole) { return std::clamp(Pct(part, whole), 0.0, 100.0); }

// The wall time a stage's shares are of: the report's span, or the stage's own window where
// it worked outside the span (read-ahead before the first batch was asked for, or during an
// evaluation between epochs).
double StageSpan(const StageStats& s, double train_ns) {
  return std::max(train_ns, static_cast<double>(s.last_end_ns - s.first_start_ns));
}

// A graph stage of the pipeline: its percentages are of concurrency x StageSpan. Busy is work,
// wait-out is time its output was held back (pipeline/stage_stats.h), and wait-in is the rest:
// waiting for input, or idle before its first item and after its last; the three add up to
// 100%.
void SetLatency(const LatencySummary& l, StageRow* r) {
  if (l.items == 0) return;
  r->latency_p50_ns = l.p50_ns;
  r->latency_p99_ns = l.p99_ns;
  r->latency_max_ns = l.max_ns;
}

// A row's counts and rates over the training time: items, samples, bytes and busy time.
StageRow CountedRow(Stage stage, const StageStats& s, int concurrency, double train_ns) {
  StageRow r;
  r.stage = stage;
  r.present = s.items > 0;
  r.concurrency = std::max(1, concurrency);
  r.items = s.items;
  r.samples = s.samples;
  r.bytes = s.bytes;
  r.busy_ns = s.busy_ns;
  r.items_per_s = train_ns > 0 ? s.items * 1e9 / train_ns : 0;
  r.samples_per_s = train_ns > 0 ? s.samples * 1e9 / train_ns : 0;
  r.outside_span_pct = Share(static_cast<double>(s.samples_outside_span), s.samples);
  SetLatency(s.latency, &r);
  return r;
}

StageRow GraphRow(Stage rs, const StageStats& s, double train_ns, bool cpu_work) {
  StageRow r = CountedRow(rs, s, s.concurrency, train_ns);
  r.cpu_work = cpu_work;
  r.queue_high_water = s.queue_high_water;
  const double span = StageSpan(s, train_ns);
  const double denom = static_cast<double>(r.concurrency) * span;
  if (r.present) {
    r.busy_pct = Share(s.busy_ns, denom);
    r.wait_output_pct = std::min(Share(s.wait_output_ns, denom), 100.0 - r.busy_pct);
    r.wait_input_pct = 100.0 - r.busy_pct - r.wait_output_pct;
  }
  // CPU time: the stage's measured thread CPU time (StageStats::cpu_ns), else its busy time.
  const double cpu = s.cpu_ns > 0 ? static_cast<double>(std::min(s.cpu_ns, s.busy_ns))
                                  : static_cast<double>(s.busy_ns);
  if (s.busy_ns > 0 && s.samples > 0) {
    r.capacity_samples_per_s = s.samples * 1e9 * r.concurrency / s.busy_ns;
    r.cpu_ns_per_sample = cpu / s.samples;
  }
  if (cpu_work && span > 0) r.cores_busy = cpu / span;
  return r;
}

// The preprocess row's split between the chain's ops: each op's sampled time scaled to all
// the samples the stage built, over its busy time. The scaled estimate can pass the busy time
// by sampling noise when the chain is nearly all of it; the shares are then scaled down to
// 100 together.
void AddChainShares(const PipelineStats& ps, StageRow* row) {
  if (ps.chain_ops.empty() || ps.chain_timed_samples == 0 || row->busy_ns <= 0) return;
  const double scale = static_cast<double>(row->samples) / ps.chain_timed_samples;
  double chain_ns = 0;
  for (const ChainOpTime& t : ps.chain_ops) chain_ns += std::max<int64_t>(0, t.sampled_ns) * scale;
  const double busy = static_cast<double>(row->busy_ns);
  const double fit = chain_ns > busy ? busy / chain_ns : 1.0;
  std::vector<ChainOpShare> shares;
  double sum = 0;
  for (const ChainOpTime& t : ps.chain_ops) {
    const double pct = Share(std::max<int64_t>(0, t.sampled_ns) * scale * fit, busy);
    shares.push_back({t.op, pct});
    sum += pct;
  }
  row->ops = std::move(shares);
  row->outside_chain_pct = std::max(0.0, 100.0 - sum);
}

// A part of another stage's work (StageInfo::part_of; decode: the chain's decoder, run by the
// preprocess stage's threads for each image). Its shares are of the same time as the whole's
// (its concurrency x its span), and its busy time is part of the whole's busy: the whole's busy
// + wait-in + wait-out = 100 stays true, and the part's busy is the share of the whole's that
// did it. Capacity: what those threads would do if they did nothing else.
StageRow PartRow(Stage part, Stage whole, const PipelineStats& ps, double train_ns) {
  const StageStats& d = ps[part];
  const StageStats& pre = ps[whole];
  StageRow r = CountedRow(part, d, pre.concurrency, train_ns);
  r.cpu_work = false;  // counted in the whole's
  const double span = StageSpan(pre, train_ns);
  if (r.present) r.busy_pct = Share(d.busy_ns, r.concurrency * span);
  // The cores its share of the whole's CPU time kept busy: the whole's threads waited for a
  // core part of their busy time, and that part was no core's work (a decode row's wall time
  // showed 1.14 cores against preprocess's 0.80 of CPU, which contains it). Its CPU time per
  // sample likewise (its wall time read 570 us per image against preprocess's 370 us of CPU).
  const double cpu_share =
      pre.cpu_ns > 0 && pre.busy_ns > 0
          ? std::min(1.0, static_cast<double>(pre.cpu_ns) / static_cast<double>(pre.busy_ns))
          : 1.0;
  if (d.busy_ns > 0 && d.samples > 0) {
    r.capacity_samples_per_s = d.samples * 1e9 * r.concurrency / d.busy_ns;
    r.cpu_ns_per_sample = static_cast<double>(d.busy_ns) * cpu_share / d.samples;
  }
  if (span > 0) r.cores_busy = d.busy_ns * cpu_share / span;
  r.stored_bytes = ps.decode_stored_bytes;
  return r;
}

// Pinned-buffer wait: busy_ns is the time batches whose frames were ready waited for a
// buffer, summed over batches (several wait at once), so it is shown as the batches waiting
// on average; busy_pct is the share of the span during which at least one batch waited
// (the pool's blocked span, pipeline/stage_stats.h).
StageRow PinnedRow(Stage rs, const PipelineStats& ps, double train_ns) {
  const StageStats& pw = ps[rs];
  StageRow pinned;
  pinned.stage = rs;
  pinned.present = ps.pool_buffers > 0 || pw.items > 0;
  pinned.items = pw.items;
  pinned.samples = pw.samples;
  pinned.busy_ns = pw.busy_ns;
  const double pinned_span = StageSpan(pw, train_ns);
  pinned.busy_pct = Share(pw.wait_output_ns, pinned_span);
  pinned.batches_waiting_avg = pinned_span > 0 ? pw.busy_ns / pinned_span : 0;
  pinned.queue_high_water = pw.queue_high_water;
  SetLatency(pw.latency, &pinned);
  return pinned;
}

// Compute: percentages of the training time. On the CPU, busy is the step itself and the
// wait is the consumer's wait in Next(). On a device, busy is device time from the compute
// stream's events and the wait is the stream's idle time between steps; the host's enqueue
// time is CPU work of its own (counted in the CPU budget by AnalyzeRun). A CPU step split
// across cs.threads threads: its CPU time is what those threads' CPU clocks measured
// (cs.cpu_ns), which is less than busy x threads when a team thread was not scheduled for part
// of a step.
StageRow ComputeRow(const ReportStageInfo& info, const RunRecord& run, double train_ns,
                    double measured_samples_per_s) {
  const ComputeStats& cs = run.compute;
  const StageStats& delivery = run.pipeline[Stage::kDelivery];
  StageRow compute;
  compute.stage = info.stage;
  compute.present = cs.steps > 0;
  compute.cpu_work = info.cpu_work && !cs.on_device;
  compute.concurrency = cs.on_device ? 1 : std::max(1, cs.threads);
  compute.items = cs.steps;
  compute.samples = cs.samples;
  compute.busy_ns = cs.busy_ns;
  compute.items_per_s = train_ns > 0 ? cs.steps * 1e9 / train_ns : 0;
  compute.samples_per_s = measured_samples_per_s;
  compute.busy_pct = Share(cs.busy_ns, train_ns);
  // On a device the compute stream, within the span, either runs a step or waits: before the
  // first step (the pipeline filling) as between steps. Its idle time between steps alone
  // (cs.idle_ns) misses the start, which a slow stage can stretch over most of a short run.
  compute.wait_input_pct = cs.on_device ? std::max(0.0, 100.0 - compute.busy_pct)
                                        : Share(delivery.wait_input_ns, train_ns);
  compute.queue_high_water = delivery.queue_high_water;
  SetLatency(cs.step_latency.Summary(), &compute);
  if (cs.busy_ns > 0 && cs.samples > 0) {
    compute.capacity_samples_per_s = cs.samples * 1e9 / cs.busy_ns;
    const double cpu = cs.cpu_ns > 0 ? static_cast<double>(cs.cpu_ns)
                                     : static_cast<double>(cs.busy_ns) * compute.concurrency;
    compute.cpu_ns_per_sample = cpu / cs.samples;
    if (compute.cpu_work && train_ns > 0) compute.cores_busy = cpu / train_ns;
  }
  return compute;
}

std::optional<double> CeilingFor(const Ceiling& c, int threads) {
  if (!c.measured || c.samples_per_s <= 0) return std::nullopt;
  return c.samples_per_s * threads;
}

void ApplyCeilings(const Ceilings& c, int cores, BottleneckReport* rep) {
  // An encoded dataset whose run decoded nothing (--what-if=decode): preprocess's ceiling, which
  // decodes, says nothing of a preprocess that does not.
  const bool decode_freed = c.decode.measured && !rep->row(Stage::kDecode).present;
  for (StageRow& r : rep->stages) {
    if (decode_freed && r.stage == Stage::kPreprocess) continue;
    const ReportStageInfo* info = FindReportStage(r.stage);
    if (info != nullptr && info->ceiling != nullptr) {
      const int threads = info->ceiling_per_thread ? std::min(r.concurrency, cores) : 1;
      r.ceiling_samples_per_s = CeilingFor(c.*info->ceiling, threads);
    }
    if (r.ceiling_samples_per_s && r.capacity_samples_per_s) {
      r.pct_of_ceiling = 100.0 * *r.capacity_samples_per_s / *r.ceiling_samples_per_s;
    }
  }
}

// Splits the consumer's wait among the pipeline stages (an estimate; docs/bottleneck.md,
// "Where the missing batch was"). A stage can starve compute only if it is slower per sample
// than compute: weight = max(0, 1/capacity - 1/compute capacity). If no stage is slower (the
// wait is burstiness, not throughput), weight by utilization instead.
void AttributeWait(BottleneckReport* rep) {
  const StageRow& compute = rep->row(Stage::kCompute);
  const double compute_ns =
      compute.capacity_samples_per_s ? 1e9 / *compute.capacity_samples_per_s : 0.0;
  std::array<double, kNumReportStages> w{};
  double sum = 0;
  for (int i = 0; i < kNumReportStages; ++i) {
    const StageRow& r = rep->stages[i];
    // A part's wait is its whole's (decode's is preprocess's).
    if (!r.present || r.stage == Stage::kCompute || PartOf(r.stage) || !r.capacity_samples_per_s) {
      continue;
    }
    w[i] = std::max(0.0, 1e9 / *r.capacity_samples_per_s - compute_ns);
    sum += w[i];
  }
  if (sum <= 0) {
    for (int i = 0; i < kNumReportStages; ++i) {
      const StageRow& r = rep->stages[i];
      if (!r.present || r.stage == Stage::kCompute || PartOf(r.stage)) continue;
      w[i] = std::clamp(r.busy_pct / 100.0, 0.0, 1.0);
      sum += w[i];
    }
  }
  for (int i = 0; i < kNumReportStages; ++i) {
    rep->stages[i].attributed_wait_pct = sum > 0 ? rep->input_bound_pct * w[i] / sum : 0.0;
  }
}

// The copy time hidden behind compute. Under kCopiesHiddenGoalPct a note says why: the copy
// time before each epoch's first step (the ring filling while compute had nothing to run),
// which no setting can hide, and the rest, which ran while the compute stream waited between
// steps.
constexpr double kCopiesHiddenGoalPct = 90.0;
void AddCopyHiddenShare(const ComputeStats& cs, BottleneckReport* rep) {
  if (cs.copy_ns <= 0) return;
  const double copy = static_cast<double>(cs.copy_ns);
  rep->copy_hidden_pct = Share(static_cast<double>(cs.copy_hidden_ns), copy);
  rep->copy_startup_pct = Share(static_cast<double>(cs.startup_copy_ns), copy);
  if (*rep->copy_hidden_pct >= kCopiesHiddenGoalPct) return;
  rep->notes.push_back(absl::StrFormat(
      "h2d: %.0f%% of copy time ran behind compute (goal %.0f%%): %.1f%% ran before an epoch's "
      "first step, while compute had nothing to run, which no setting hides; %.1f%% ran while "
      "the compute stream waited between steps (it waited %.1f%% of training time)",
      *rep->copy_hidden_pct, kCopiesHiddenGoalPct, *rep->copy_startup_pct,
      std::max(0.0, 100.0 - *rep->copy_hidden_pct - *rep->copy_startup_pct), rep->input_bound_pct));
}

// What the epoch split's note needs beyond EpochSplit's figures.
struct EpochExtras {
  bool slower_reads = false;  // the first epoch's reads at least kColdReadFactor slower
  double extra_epoch = 0;     // seconds the first epoch took beyond the later epochs' rate
  double extra_read = 0;      // seconds its reads took beyond the later epochs' reads
  double batches_per_epoch = 0;
};

// The first epoch against the later ones, from the trainer's per-epoch rates and the reader's
// per-epoch figures; nullopt without two epochs whose reads were recorded.
std::optional<EpochSplit> MeasureEpochSplit(const RunRecord& run, EpochExtras* x) {
  if (run.epochs.size() < 2) return std::nullopt;
  const auto reads_of = [&run](uint64_t epoch) -> const EpochReads* {
    for (const EpochReads& e : run.pipeline.epoch_reads) {
      if (e.epoch == epoch) return &e;
    }
    return nullptr;
  };
  const EpochRate& first = run.epochs.front();
  const EpochReads* first_reads = reads_of(first.epoch);
  if (first_reads == nullptr) return std::nullopt;
  EpochSplit s;
  s.first_epoch = first.epoch;
  s.first_samples_per_s = first.samples_per_s;
  s.first_seconds = first.seconds;
  s.first_read_seconds = first_reads->busy_ns / 1e9;
  if (first_reads->busy_ns > 0)
    s.first_read_mb_per_s = first_reads->bytes * 1e3 / first_reads->busy_ns;
  uint64_t samples = 0, bytes = 0;
  double seconds = 0;
  int64_t read_ns = 0;
  for (size_t i = 1; i < run.epochs.size(); ++i) {
    const EpochReads* r = reads_of(run.epochs[i].epoch);
    if (r == nullptr) continue;
    ++s.later_epochs;
    samples += run.epochs[i].samples;
    seconds += run.epochs[i].seconds;
    bytes += r->bytes;
    read_ns += r->busy_ns;
  }
  if (s.later_epochs == 0 || seconds <= 0) return std::nullopt;
  s.later_samples_per_s = samples / seconds;
  s.later_seconds = seconds / s.later_epochs;
  s.later_read_seconds = read_ns / 1e9 / s.later_epochs;
  if (read_ns > 0) s.later_read_mb_per_s = bytes * 1e3 / read_ns;
  s.differ = s.first_samples_per_s < (1 - kEpochsDifferFraction) * s.later_samples_per_s;
  x->slower_reads =
      s.first_read_mb_per_s > 0 && s.later_read_mb_per_s >= kColdReadFactor * s.first_read_mb_per_s;
  // The first epoch's extra time and its reads' extra time, each against what the later epochs'
  // rates give for as many samples (a resumed first epoch may be shorter).
  x->extra_epoch = s.first_seconds - first.samples / s.later_samples_per_s;
  x->extra_read =
      s.first_read_seconds - (samples > 0 ? read_ns / 1e9 * first.samples / samples : 0.0);
  x->batches_per_epoch =
      static_cast<double>(run.compute.steps) / static_cast<double>(run.epochs.size());
  s.ran_ahead = x->batches_per_epoch > 0 && run.pipeline.pool_buffers >= 0.5 * x->batches_per_epoch;
  s.cold = s.differ && !s.ran_ahead && x->slower_reads && x->extra_epoch > 0 &&
           x->extra_read >= kColdExplainsFraction * x->extra_epoch;
  return s;
}

// The note on a first epoch that differs: why, when the reads tell.
// `remote`: a remote dataset read through the local cache (RunRecord::network).
std::string EpochSplitNote(const EpochSplit& s, const EpochExtras& x, uint32_t pool_buffers,
                           bool remote) {
  const std::string rates =
      absl::StrFormat("epoch %d trained at %s, the %d later %s at %s (%.1fx)", s.first_epoch + 1,
                      FormatRate(s.first_samples_per_s), s.later_epochs,
                      s.later_epochs == 1 ? "one" : "ones", FormatRate(s.later_samples_per_s),
                      s.later_samples_per_s / std::max(s.first_samples_per_s, 1e-9));
  if (s.ran_ahead) {
    return absl::StrFormat(
        "epochs do not compare: %s, but the pipeline keeps up to %d batches ready (an epoch has "
        "%.0f), so the later epochs began with batches built during the first one and its "
        "evaluation; a dataset of many more batches than the pool shows each epoch's own rate",
        rates, pool_buffers, x.batches_per_epoch);
  }
  if (s.cold) {
    return absl::StrFormat(
        "cold first epoch: %s; its reads ran at %.1f MB/s against %.1f MB/s after (the reader "
        "busy %.2f s against %.2f s per later epoch): epoch %d read %s, the later ones "
        "from %s; the table covers every epoch, and a longer run gets the later rate",
        rates, s.first_read_mb_per_s, s.later_read_mb_per_s, s.first_read_seconds,
        s.later_read_seconds, s.first_epoch + 1, remote ? "from the object store" : "from disk",
        remote ? "the local cache (--cache-bytes)" : "the page cache");
  }
  if (x.slower_reads) {
    return absl::StrFormat(
        "slow first epoch: %s; its reads were slower (%.1f MB/s against %.1f MB/s after, as "
        "from disk or a colder cache) but took only %.2f s more, of the %.2f s more the epoch "
        "took: mostly start-up, not the reads (buffers touched for the first time, threads "
        "starting)",
        rates, s.first_read_mb_per_s, s.later_read_mb_per_s, std::max(0.0, x.extra_read),
        std::max(0.0, x.extra_epoch));
  }
  return absl::StrFormat(
      "slow first epoch: %s, although its reads were not 2x slower (%.1f MB/s against %.1f "
      "MB/s after): start-up, not the disk (buffers touched for the first time, threads "
      "starting)",
      rates, s.first_read_mb_per_s, s.later_read_mb_per_s);
}

void AddEpochSplit(const RunRecord& run, BottleneckReport* rep) {
  EpochExtras x;
  const std::optional<EpochSplit> s = MeasureEpochSplit(run, &x);
  if (!s) return;
  rep->epoch_split = *s;
  if (s->differ) {
    rep->notes.push_back(EpochSplitNote(*s, x, run.pipeline.pool_buffers,
                                        run.network.has_value() && run.network->cache_on));
  }
}

}  // namespace

namespace {
constexpr auto kVerdictNames =
    MakeEnumNames<VerdictClass>({{VerdictClass::kInputBound, "input-bound"},
                                 {VerdictClass::kPartlyInputBound, "partly-input-bound"},
                                 {VerdictClass::kComputeBound, "compute-bound"},
                                 {VerdictClass::kLaunchBound, "launch-bound"},
                                 {VerdictClass::kCpuBound, "cpu-bound"},
                                 {VerdictClass::kNoData, "no-data"},
                                 {VerdictClass::kCommunicationBound, "communication-bound"}});
}  // namespace

const char* VerdictClassName(VerdictClass v) {
  return kVerdictNames.Name(v).data();  // the names are string literals, so NUL-terminated
}

std::optional<VerdictClass> ParseVerdictClass(absl::string_view name) {
  return kVerdictNames.Parse(name);
}

namespace {

// One row per stage of kReportStageTable, in its order.
void AddRows(const RunRecord& run, double train_ns, BottleneckReport* rep) {
  const PipelineStats& ps = run.pipeline;
  for (const ReportStageInfo& info : kReportStageTable) {
    switch (info.source) {
      case RowSource::kGraphStage:
        rep->stages.push_back(GraphRow(info.stage, ps[info.stage], train_ns, info.cpu_work));
        if (info.stage == Stage::kPreprocess) AddChainShares(ps, &rep->stages.back());
        break;
      case RowSource::kPinnedPool:
        rep->stages.push_back(PinnedRow(info.stage, ps, train_ns));
        break;
      case RowSource::kCompute:
        rep->stages.push_back(ComputeRow(info, run, train_ns, rep->measured_samples_per_s));
        break;
      case RowSource::kPartOfStage:
        rep->stages.push_back(PartRow(info.stage, *info.part_of, ps, train_ns));
        break;
    }
  }
  const StageRow& compute = rep->row(Stage::kCompute);
  const ComputeStats& cs = run.compute;
  rep->input_bound_pct = compute.wait_input_pct;
  rep->host_wait_pct = Share(ps[Stage::kDelivery].wait_input_ns, train_ns);
  rep->compute_host_pct = Share(cs.enqueue_ns > 0 ? cs.enqueue_ns : cs.busy_ns, train_ns);
  rep->launch_gated_pct = Share(cs.launch_gated_ns, train_ns);
}

// The model's rate with each what-if stage free (model.if_free): a stage of the model loses its
// cost; decode and the transform chain, parts of preprocess, take their share of preprocess's
// cost with them (decode's busy time, the chain ops' shares).
void PredictFreed(const ResourceModel& model, BottleneckReport* rep) {
  for (const StageInfo& info : kStageTable) {
    if (!info.what_if) continue;
    Allocation a = model.Current();
    if (model.Find(info.stage) != nullptr) {
      a.free_stage = info.stage;
    } else if (info.part_of && model.Find(*info.part_of) != nullptr) {
      // A part of a stage: its share of the whole's busy time, from its own row; a part
      // without a row (the transform chain) from the whole's per-op shares.
      const StageRow& whole = rep->row(*info.part_of);
      if (whole.busy_ns <= 0) continue;
      double part = 0;
      if (FindReportRow(info.stage) >= 0) {
        const StageRow& r = rep->row(info.stage);
        if (!r.present) continue;
        part = static_cast<double>(r.busy_ns) / whole.busy_ns;
      } else {
        if (!whole.ops) continue;
        for (const ChainOpShare& op : *whole.ops) part += op.share_pct / 100;
      }
      a.cost_scale[*info.part_of] = std::clamp(1.0 - part, 0.0, 1.0);
    } else {
      continue;
    }
    rep->if_free.emplace_back(info.stage, model.Predict(a).samples_per_s);
  }
}

// Prediction: the resource model's lowest bound for the run's own allocation (each stage's
// threads over its cost per sample, the cores over the CPU stages' summed CPU time per sample,
// the link, the device). The slowest wall-time capacity and the CPU figures are kept beside it.
void Predict(const ComputeStats& cs, double train_ns, BottleneckReport* rep) {
  double cap = std::numeric_limits<double>::infinity();
  double cpu_busy = 0;
  for (const StageRow& r : rep->stages) {
    if (!r.present) continue;
    // A part shares its whole's threads: the whole's capacity already holds its cost.
    if (r.capacity_samples_per_s && !PartOf(r.stage)) {
      cap = std::min(cap, *r.capacity_samples_per_s);
    }
    if (r.cpu_work) cpu_busy += r.cores_busy * train_ns;
  }
  if (cs.on_device && cs.samples > 0) {  // the host thread enqueuing the steps
    cpu_busy += static_cast<double>(cs.enqueue_ns);
  }
  rep->capacity_limit_samples_per_s = std::isfinite(cap) ? cap : 0;
  rep->cpu_threads_busy = train_ns > 0 ? cpu_busy / train_ns : 0;
  rep->cpu_saturated = rep->cpu_threads_busy >= kCpuSaturated * rep->cores;
  // The cores left by other processes; but never fewer than this process used: what others
  // took was partly cores this run did not ask for.
  rep->model_cores =
      std::clamp(std::max(rep->cores - rep->other_cores_busy.value_or(0), rep->process_cores_busy),
                 0.1, static_cast<double>(rep->cores));
  const bool quiet_ceilings = !rep->ceilings || rep->ceilings->other_cores_busy < kBusyMachineCores;
  const double process_cpu_ns_per_sample =
      cs.samples > 0 ? rep->process_cores_busy * train_ns / static_cast<double>(cs.samples) : 0;
  const ResourceModel model = BuildResourceModel(rep->stages, cs, rep->model_cores, quiet_ceilings,
                                                 process_cpu_ns_per_sample);
  rep->model = model.Predict(model.Current());
  rep->resource_model = model;
  PredictFreed(model, rep);
  rep->predicted_samples_per_s = rep->model.samples_per_s;
  for (const Bound& b : rep->model.bounds) {
    if (b.constraint == Constraint::kSharedCpu) rep->cpu_limit_samples_per_s = b.samples_per_s;
  }
  for (const StageCost& c : model.stages()) {
    if (c.cpu_ns > 0) rep->starved_pct.emplace_back(c.stage, model.StarvedPct(c.stage));
  }
  // A foreign step (the Python consumer) that ran a team of threads: its CPU time came from
  // the process's, beyond its own thread's (AddForeignStepCpu). Only a step that takes a part
  // of the run worth naming (5% of its wall clock): an empty loop's few microseconds make a
  // ratio of noise (a new user's empty loop was said to run on 2.0 cores).
  const StageCost* step = model.Find(Stage::kCompute);
  if (cs.foreign_step && !cs.on_device && step != nullptr && step->threads > 1 && cs.samples > 0 &&
      step->cpu_ns * static_cast<double>(cs.samples) >= kStepNotedShare * train_ns) {
    rep->notes.push_back(absl::StrFormat(
        "your step ran on about %.1f cores: its thread's CPU time was %.0f us per sample and "
        "the process's time no stage accounts for %.0f us, which the model gives to the step "
        "(torch's intra-op threads, OpenBLAS's). A team of threads sharing the cores with the "
        "pipeline's swings from step to step, and so may the rates predicted here; "
        "torch.set_num_threads(1), and OPENBLAS_NUM_THREADS=1 where torch uses OpenBLAS, keep "
        "the step on one core",
        step->cpu_ns * cs.samples / std::max<double>(1.0, cs.busy_ns),
        static_cast<double>(cs.cpu_ns) / cs.samples / 1e3, step->cpu_ns / 1e3));
  }
}

// Work the pipeline did while the trainer was outside the span (evaluation, between epochs):
// the rates over the span include it; the model counts only the rest against the span.
void AddWorkAheadNote(BottleneckReport* rep) {
  std::vector<std::string> parts;
  for (const StageRow& r : rep->stages) {
    if (r.present && r.stage != Stage::kDecode && r.outside_span_pct >= kWorkAheadNotedPct) {
      parts.push_back(absl::StrFormat("%s %.0f%%", StageName(r.stage), r.outside_span_pct));
    }
  }
  if (parts.empty()) return;
  rep->notes.push_back(absl::StrCat(
      "work done ahead: the pipeline built part of its samples while the trainer was outside "
      "the training time (evaluating, between epochs, writing a checkpoint): ",
      absl::StrJoin(parts, ", "),
      " of each stage's samples; the rates above include that work (so a rate can pass the "
      "stage's capacity), and the resource model counts only the rest against the training "
      "time (stages[].outside_span_pct)"));
}

// Remote reads whose bytes arrived back to back: the store's or the link's bandwidth held
// them, not its latency. A fact about the reads, whichever stage the verdict names (a what-if
// table or the ranks' figures may decide it again after this note).
void AddBandwidthNote(const RunRecord& run, BottleneckReport* rep) {
  if (!run.network || run.network->requests == 0 ||
      run.network->receiving_fraction < kBandwidthBoundReceiving) {
    return;
  }
  rep->notes.push_back(absl::StrFormat(
      "the remote reads were bandwidth-bound: a response was arriving %.0f%% of the time one "
      "was in flight, so the bytes came as fast as the object store or the link sent them; "
      "where the reads limit the run, more requests in flight (--read-concurrency) do not "
      "raise that rate unless the store caps each connection rather than the total (the "
      "default, --read-concurrency 0, tries more and keeps what pays); the local cache "
      "(--cache-dir, --cache-bytes) serves the epochs after the first from disk, and fewer "
      "bytes per sample fetch less (docs/storage.md, \"What the report shows\")",
      100.0 * run.network->receiving_fraction));
}

// The caveats: dropped spans, skipped frames, injected delays, nothing evaluated, device time.
void AddNotes(const RunRecord& run, BottleneckReport* rep) {
  const PipelineStats& ps = run.pipeline;
  if (rep->ceilings && rep->ceilings->other_cores_busy >= kBusyMachineCores) {
    rep->notes.push_back(absl::StrFormat(
        "the ceilings were measured while other processes used %.1f cores: they understate the "
        "stages alone (the next run measures them again)",
        rep->ceilings->other_cores_busy));
  }
  if (ps.trace_dropped > 0) {
    rep->notes.push_back(
        absl::StrCat(ps.trace_dropped, " trace spans were dropped (raise the trace capacity)"));
  }
  if (ps.skipped_frames > 0) {
    rep->notes.push_back(absl::StrCat(ps.skipped_frames, " corrupt frames skipped (",
                                      ps.skipped_records, " records)"));
  }
  if (run.test_skipped_frames > 0) {
    rep->notes.push_back(absl::StrCat(run.test_skipped_frames,
                                      " corrupt frames of the test split skipped (",
                                      run.test_skipped_records, " records)"));
  }
  if (!run.injected_delays.empty()) {
    rep->notes.push_back(absl::StrCat(
        "injected delays (--inject-delay): ", run.injected_delays,
        "; every figure above includes them, and the advice is for the stage as delayed"));
  }
  if (!run.not_evaluated.empty()) {
    rep->notes.push_back(absl::StrCat("nothing was evaluated: ", run.not_evaluated));
  }
  AddBandwidthNote(run, rep);
  AddWorkAheadNote(rep);
  if (rep->train_seconds > 0 && rep->train_seconds < kShortSpanSeconds && rep->steps > 0) {
    rep->notes.push_back(absl::StrFormat(
        "a short span: %.2f s (%d steps). Identical passes this short differed by up to 30%% in "
        "rate on a 2-core machine, and this report's predictions with them: act on advice "
        "that the reports of several passes agree on (docs/bottleneck.md, \"Short passes\")",
        rep->train_seconds, rep->steps));
  }
  if (rep->other_cores_busy && *rep->other_cores_busy >= kOtherCoresNoted) {
    rep->notes.push_back(absl::StrFormat(
        "other processes kept %.1f of this run's %d cores busy on average while it trained; the "
        "resource model counts the %.1f left (a quieter machine would run faster)",
        *rep->other_cores_busy, rep->cores, rep->model_cores));
  }
}

}  // namespace

MeasuredRate MeasureRate(const RunRecord& run) {
  const ComputeStats& cs = run.compute;
  double train_ns = run.train_seconds * 1e9;
  if (train_ns <= 0) train_ns = static_cast<double>(cs.last_end_ns - cs.first_start_ns);
  MeasuredRate m;
  m.seconds = train_ns / 1e9;
  m.samples = cs.samples > 0 ? cs.samples : static_cast<uint64_t>(run.samples);
  m.samples_per_s = train_ns > 0 ? m.samples * 1e9 / train_ns : 0;
  return m;
}

BottleneckReport AnalyzeRun(const RunRecord& run, const Ceilings* ceilings, int cores) {
  BottleneckReport rep;
  rep.cores = std::max(1, cores);
  rep.device = run.compute.device.empty() ? run.device : run.compute.device;
  rep.is_cuda = run.compute.is_cuda;
  rep.on_device = run.compute.on_device;
  rep.consumer = run.consumer;
  rep.pipeline = run.pipeline;
  rep.memory = run.memory;
  rep.memory_formula = run.memory_formula;
  rep.host_memory = run.host_memory;
  rep.network = run.network;
  rep.network_includes_evaluation = run.not_evaluated.empty();
  rep.read_concurrency = run.read_concurrency;
  rep.read_concurrency_tuned = run.read_concurrency_tuned;
  if (ceilings != nullptr) rep.ceilings = *ceilings;

  const ComputeStats& cs = run.compute;
  const MeasuredRate measured = MeasureRate(run);
  const double train_ns = measured.seconds * 1e9;
  rep.train_seconds = measured.seconds;
  rep.samples = measured.samples;
  rep.other_cores_busy = run.other_cores_busy;
  rep.process_cores_busy = run.process_cores_busy;
  rep.steps = cs.steps;
  rep.measured_samples_per_s = measured.samples_per_s;

  AddRows(run, train_ns, &rep);
  // The ceilings first: the model takes CPU compute's own rate from its ceiling.
  if (ceilings != nullptr) ApplyCeilings(*ceilings, rep.cores, &rep);
  Predict(cs, train_ns, &rep);
  AttributeWait(&rep);
  AddNotes(run, &rep);
  AddCopyHiddenShare(cs, &rep);
  AddEpochSplit(run, &rep);
  if (rep.on_device) {
    rep.notes.push_back(absl::StrFormat(
        "compute busy is device time from events on the compute stream; the host spent %.0f%% "
        "of training time enqueuing steps and %.0f%% blocked taking the next batch (waiting for "
        "it or for a free device slot while the device computes); compute itself waited %.0f%%",
        rep.compute_host_pct, rep.host_wait_pct, rep.input_bound_pct));
  }
  ApplyVerdict(Decide({.analysis = &rep, .run = &run}), &rep);
  return rep;
}

}  // namespace sluice
