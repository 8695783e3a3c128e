// Figures as the report writes them, in every sentence and renderer.
// Thread safety: pure functions.
#ifndef SLUICE_REPORT_FORMAT_H_
#define SLUICE_REPORT_FORMAT_H_

#include <string>

#include "report/model/resource_model.h"
#include "report/record/data_parallel.h"

namespace sluice {

// "1.23 M samples/s", "45.6 k samples/s", "789 samples/s".
std::string FormatRate(double samples_per_s);
// "rank 2 is the straggler: its input pipeline (decompress) limits it (input-bound); the others
// wait 31% of the step for it".
std::string StragglerClause(const Straggler& s);
// What a resource model bound is, in words: "decompress's 2 threads", "the 2 cores (decompress
// takes the most CPU time)", "the link (h2d copies)", "the device (compute)".
std::string BoundPhrase(const Bound& b, int cores);

}  // namespace sluice

#endif  // SLUICE_REPORT_FORMAT_H_
