// Figures as the report writes them, in every sentence and renderer.
// Thread safety: pure functions.
#ifndef SLUICE_REPORT_FORMAT_H_
#define SLUICE_REPORT_FORMAT_H_

#include <string>

#include "report/analysis/bottleneck_report.h"
#include "report/model/resource_model.h"
#include "report/record/data_parallel.h"

namespace sluice {

// "1.23 M samples/s", "45.6 k samples/s", "789 samples/s".
std::string FormatRate(double samples_per_s);
// "850 ns", "12.3 us", "4.56 ms", "1.23 s": three significant figures at most.
std::string FormatDuration(int64_t ns);
// A row's item latency: "p50 1.20 ms, p99 3.40 ms, max 5.10 ms per frame"; "" when the row has
// none (report/analysis/bottleneck_report.h StageRow::latency_*).
std::string FormatItemLatency(const StageRow& r);
// "rank 2 is the straggler: its input pipeline (decompress) limits it (input-bound); the others
// wait 31% of the step for it".
std::string StragglerClause(const Straggler& s);
// What a resource model bound is, in words: "decompress's 2 threads", "the 2 cores (decompress
// takes the most CPU time)", "the link (h2d copies)", "the device (compute)".
std::string BoundPhrase(const Bound& b, int cores);

}  // namespace sluice

#endif  // SLUICE_REPORT_FORMAT_H_
