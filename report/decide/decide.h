// Decide: the one place that writes a verdict of the bottleneck report — its class, the
// limiting stage, the sentence and the advice — for every consumer: sluice-train (with or
// without what-if reruns, in one process or data parallel), sluice.Loader's report and
// sluice.probe's. docs/bottleneck.md, "Verdict", explains each class and how to act on it.
//
//   BottleneckReport rep = AnalyzeRun(run, &ceilings, cores);     // rows, and Decide({&rep, &run})
//   ...what-if reruns...
//   ApplyVerdict(Decide({.analysis = &rep, .run = &run, .what_if = &rows}), &rep);
//
// Evidence, in the order Decide weighs it:
//   1. the analysis's rows (AnalyzeRun, or AnalyzeLoaderProbe's two rows with `probe`);
//   2. a data-parallel job's exchange and ranks, when the analysis has them (rank 0);
//   3. measured what-if reruns, which win over the inference where the two disagree.
// Decide is a pure function of its evidence: identical evidence gives an identical verdict.
// The renderers (report/render/) print a verdict and never decide one.
// Thread safety: pure functions.
#ifndef SLUICE_REPORT_DECIDE_DECIDE_H_
#define SLUICE_REPORT_DECIDE_DECIDE_H_

#include <string>
#include <vector>

#include "report/advice/advice.h"
#include "report/analysis/bottleneck_report.h"
#include "report/analysis/loader_probe.h"
#include "report/record/run_record.h"
#include "report/record/what_if_rows.h"

namespace sluice {

struct Verdict {
  VerdictClass verdict = VerdictClass::kNoData;
  Stage limiting_stage = Stage::kCompute;
  std::string sentence;        // one sentence, the limit named first, with what to do
  std::vector<Advice> advice;  // the suggestion as settings, in the sentence's order
};

struct Evidence {
  const BottleneckReport* analysis = nullptr;       // required: the rows and the run's figures
  const RunRecord* run = nullptr;                   // a sluice run's record (for the advice)
  const ProbeFigures* probe = nullptr;              // or: another loader, measured by sluice.probe
  const std::vector<WhatIfRow>* what_if = nullptr;  // measured what-if reruns of the run
};

// The verdict the evidence supports. Without `run` and without `probe`, the advice is empty
// (no settings to name).
Verdict Decide(const Evidence& evidence);

// Writes `verdict` into the report's verdict fields (verdict, limiting_stage, sentence,
// advice).
void ApplyVerdict(Verdict verdict, BottleneckReport* report);

}  // namespace sluice

#endif  // SLUICE_REPORT_DECIDE_DECIDE_H_
