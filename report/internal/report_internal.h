// Functions the bottleneck report's files share (bottleneck_report.cc, bottleneck_verdict.cc,
// bottleneck_world.cc, bottleneck_report_output.cc, report_html.cc, loader_probe.cc). Private
// to engine/diagnostics/.
#ifndef SLUICE_REPORT_INTERNAL_REPORT_INTERNAL_H_
#define SLUICE_REPORT_INTERNAL_REPORT_INTERNAL_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "report/analysis/bottleneck_report.h"
#include "report/record/run_record.h"

namespace sluice::report_internal {

// "1.23 M samples/s", "45.6 k samples/s", "789 samples/s" (bottleneck_verdict.cc).
std::string FormatRate(double samples_per_s);
// The verdict class, limiting stage, sentence and advice of `rep` (bottleneck_verdict.cc).
void DecideVerdict(const RunRecord& run, BottleneckReport* rep);
// VerdictClassName's inverse; nullopt for an unknown name (bottleneck_report.cc).
std::optional<VerdictClass> ParseVerdictClass(absl::string_view name);
// The exchange section and the ranks table of a data-parallel report; "" in a single process
// (bottleneck_world.cc).
std::string FormatWorld(const BottleneckReport& rep);
// The decode row's indented line: it runs inside preprocess, its time per image, its ceiling
// (bottleneck_report_output.cc).
std::string FormatDecodeLine(const BottleneckReport& rep, const StageRow& decode);
// The preprocess row's split between the transform chain's ops, as an indented line of the
// table ("  chain: 61% RandomCrop(...), ..., 30% outside the chain ..."); "" without ops
// (bottleneck_report_output.cc).
std::string FormatChainShares(const StageRow& row);

}  // namespace sluice::report_internal

#endif  // SLUICE_REPORT_INTERNAL_REPORT_INTERNAL_H_
