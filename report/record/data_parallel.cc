#include "report/record/data_parallel.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<AllReduceCeiling> MeasureAllReduceCeiling(dist::Communicator* comm, int64_t bytes,
                                                         int warmups, int repetitions) {
  AllReduceCeiling c;
  c.world_size = comm->size();
  c.local_size = comm->local_size();
  // Every rank must reduce the same count: agree on the largest.
  double agreed = static_cast<double>(std::max<int64_t>(0, bytes));
  RETURN_IF_ERROR(comm->AllReduceMax(&agreed, 1));
  c.bytes = static_cast<int64_t>(agreed) / 4 * 4;
  if (!comm->is_distributed() || c.bytes == 0 || repetitions < 1) {
    c.note = !comm->is_distributed() ? "not measured: a single process exchanges nothing"
                                     : "not measured: no gradient bytes";
    return c;
  }
  c.warmups = std::max(0, warmups);
  c.repetitions = repetitions;
  std::vector<float> data(static_cast<size_t>(c.bytes / 4), 1.0f);
  for (int i = 0; i < c.warmups; ++i) {
    RETURN_IF_ERROR(comm->AllReduceSum(data.data(), data.size()));
  }
  std::vector<double> ns;
  for (int i = 0; i < c.repetitions; ++i) {
    // The barrier lines the ranks up, so a rank arriving late is not timed as bandwidth.
    RETURN_IF_ERROR(comm->Barrier());
    const int64_t t0 = SteadyNs();
    RETURN_IF_ERROR(comm->AllReduceSum(data.data(), data.size()));
    ns.push_back(static_cast<double>(SteadyNs() - t0));
  }
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  double median = ns[ns.size() / 2];
  // The call ends on every rank only when the slowest has its result: take the slowest median.
  RETURN_IF_ERROR(comm->AllReduceMax(&median, 1));
  c.measured = true;
  c.median_us = median / 1e3;
  c.gb_per_s = median > 0 ? static_cast<double>(c.bytes) / median : 0;
  c.note = absl::StrFormat(
      "median of %d all-reduces (float sum) of %d bytes after %d warm-ups, %d ranks (%d on "
      "rank 0's host), %s; measured every run (not cached)",
      c.repetitions, c.bytes, c.warmups, c.world_size, c.local_size, comm->description());
  return c;
}

absl::StatusOr<std::vector<RankSummary>> ParseRankSummaries(const std::vector<std::string>& all) {
  std::vector<RankSummary> out;
  for (size_t r = 0; r < all.size(); ++r) {
    try {
      out.push_back(nlohmann::json::parse(all[r]).get<RankSummary>());
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(
          absl::StrCat("rank ", r, "'s report summary does not parse: ", e.what()));
    }
    if (out.back().rank != static_cast<int>(r)) {
      return absl::DataLossError(absl::StrCat("the report summary gathered from rank ", r,
                                              " says it is rank ", out.back().rank));
    }
  }
  return out;
}

}  // namespace sluice
