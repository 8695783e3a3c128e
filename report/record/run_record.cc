#include "report/record/run_record.h"

#include <algorithm>
#include <utility>

#include "storage/remote/remote_env.h"

namespace sluice {

std::optional<NetworkRead> CollectNetworkRead() {
  const remote::RemoteReadStats s = remote::CollectRemoteStats();
  if (!s.used) return std::nullopt;
  NetworkRead n;
  n.requests = s.requests;
  n.retries = s.retries;
  n.throttled = s.throttled;
  n.server_errors = s.server_errors;
  n.connection_errors = s.connection_errors;
  n.bytes = s.bytes;
  n.max_in_flight = s.max_in_flight;
  n.mean_in_flight = s.mean_in_flight;
  n.receiving_fraction = s.receiving_fraction;
  n.latency_p50_ns = s.latency.p50_ns;
  n.latency_p99_ns = s.latency.p99_ns;
  n.cache_hits = s.cache_hits;
  n.cache_misses = s.cache_misses;
  n.cache_hit_bytes = s.cache_hit_bytes;
  n.cache_on = s.cache_on;
  n.cache_writes_off = s.cache_writes_off_why;
  return n;
}

int ComputeTimeline::used() const {
  if (bucket_ns == 0) return 0;
  return static_cast<int>(
      std::min<int64_t>(kBuckets, (end_ns - origin_ns + bucket_ns - 1) / bucket_ns));
}

void ComputeTimeline::Open(int64_t origin) {
  if (bucket_ns != 0 || origin <= 0) return;
  origin_ns = origin;
  end_ns = origin;
  bucket_ns = kFirstBucketNs;
  from_span_start = true;
}

void ComputeTimeline::Coarsen() {
  for (std::array<int64_t, kBuckets>* a : {&compute_ns, &other_ns}) {
    for (int i = 0; i < kBuckets / 2; ++i) (*a)[i] = (*a)[2 * i] + (*a)[2 * i + 1];
    std::fill(a->begin() + kBuckets / 2, a->end(), 0);
  }
  bucket_ns *= 2;
}

void ComputeTimeline::Add(int64_t start, int64_t end, std::array<int64_t, kBuckets>* into) {
  if (end <= start) return;
  if (bucket_ns == 0) {
    origin_ns = start;
    bucket_ns = kFirstBucketNs;
  }
  start = std::max(start, origin_ns);  // a span that began before the first is cut there
  if (end <= start) return;
  while (end - origin_ns > kBuckets * bucket_ns) Coarsen();
  end_ns = std::max(end_ns, end);
  for (int64_t b = (start - origin_ns) / bucket_ns; b < kBuckets; ++b) {
    const int64_t lo = origin_ns + b * bucket_ns;
    const int64_t hi = lo + bucket_ns;
    if (lo >= end) break;
    (*into)[b] += std::min(end, hi) - std::max(start, lo);
  }
}

namespace {
int64_t Overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return std::max<int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}
}  // namespace

void CopyOverlap::AddCopy(int64_t start, int64_t end) {
  if (end <= start) return;  // as CopyHiddenShare: an empty span is no copy
  copy_ns_ += end - start;
  for (const Span& c : compute_) hidden_ns_ += Overlap(start, end, c.first, c.second);
  // Copies run in order on one stream: no later copy starts before this one.
  while (!compute_.empty() && compute_.front().second <= start) compute_.pop_front();
  copies_.emplace_back(start, end);
  if (copies_.size() > kMaxPending) copies_.pop_front();
}

void CopyOverlap::AddCompute(int64_t start, int64_t end, bool first_of_epoch) {
  if (first_of_epoch) {  // no step ran between the previous one's end and this start
    for (const Span& c : copies_) {
      startup_ns_ += Overlap(c.first, c.second, compute_end_, std::max(compute_end_, start));
    }
  }
  start = std::max(start, compute_end_);  // the part no earlier step covered
  if (end <= start) return;
  for (const Span& c : copies_) hidden_ns_ += Overlap(start, end, c.first, c.second);
  compute_end_ = end;
  while (!copies_.empty() && copies_.front().second <= compute_end_) copies_.pop_front();
  compute_.emplace_back(start, end);
  if (compute_.size() > kMaxPending) compute_.pop_front();
}

RunRecord RunRecordFromStats(PipelineStats pipeline, ComputeStats compute) {
  RunRecord r;
  r.pipeline = std::move(pipeline);
  r.compute = std::move(compute);
  r.device = r.compute.device;
  r.samples = r.compute.samples;
  // The span opens when the first batch was asked for: the pipeline's start when it started
  // first (the wait for the first batch is in the span, as it is in the wall clock).
  int64_t start = r.compute.first_start_ns;
  if (r.pipeline.start_ns > 0 && (start == 0 || r.pipeline.start_ns < start)) {
    start = r.pipeline.start_ns;
  }
  r.train_seconds = r.compute.last_end_ns > start ? (r.compute.last_end_ns - start) * 1e-9 : 0.0;
  return r;
}

}  // namespace sluice
