// The what-if table: the same job rerun with one stage made free at a time
// (engine/job/what_if.h runs it). A row is a measurement the verdict defers to
// (report/decide/decide.h: the table wins over the inference where they disagree).
// Thread safety: plain values.
#ifndef SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_
#define SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_

#include <string>

namespace sluice {

struct WhatIfRow {
  // "normal", "read", "decompress", "preprocess", "h2d", "compute", "decode" (a part of
  // preprocess), or "transforms" (the chain alone, a part of preprocess: it never decides the
  // verdict's stage)
  std::string free_stage;
  std::string note;  // why the row was not run (then samples_per_s is 0)
  double samples_per_s = 0;
  double speedup = 0;  // samples_per_s / the normal run's
};

}  // namespace sluice

#endif  // SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_
