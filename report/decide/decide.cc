#include "report/decide/decide.h"

#include <utility>

#include "report/decide/internal/verdicts.h"

namespace sluice {

Verdict Decide(const Evidence& e) {
  using namespace decide_internal;  // NOLINT: the verdicts this composes
  const BottleneckReport& a = *e.analysis;
  Verdict v = e.probe != nullptr ? ProbeVerdict(a, *e.probe) : RunVerdict(a, e.run);
  if (a.exchange && a.ranks.size() >= 2) v = WorldVerdict(std::move(v), a);
  if (e.what_if != nullptr) v = WhatIfVerdict(std::move(v), *e.what_if, a, e.run);
  return v;
}

void ApplyVerdict(Verdict verdict, BottleneckReport* report) {
  report->verdict = verdict.verdict;
  report->limiting_stage = verdict.limiting_stage;
  report->sentence = std::move(verdict.sentence);
  report->advice = std::move(verdict.advice);
}

}  // namespace sluice
