// The SVG charts of the HTML report (report_html.h), each a whole panel: a heading, an inline
// <svg> (no xmlns: the page names no URL) and its legend. Private to report_html*.cc.
#ifndef SLUICE_REPORT_RENDER_INTERNAL_HTML_CHARTS_H_
#define SLUICE_REPORT_RENDER_INTERNAL_HTML_CHARTS_H_

#include <string>
#include <vector>

#include "report/record/run_record.h"

namespace sluice::report_html_internal {

// Bars of each epoch's training rate (<svg id="epochs">); a line of text when there is none.
std::string EpochChart(const std::vector<EpochRate>& epochs);

// Per time bucket, stacked shares of its wall time: the steps (compute), evaluation, and the
// rest, time between steps (<svg id="timeline">); a line of text when the timeline is empty.
std::string TimelineChart(const ComputeTimeline& timeline);

// A horizontal bar filled to `fraction` (clamped to [0, 1]), as a CSS <div>.
std::string Bar(double fraction, const char* fill_class = "fill");

}  // namespace sluice::report_html_internal

#endif  // SLUICE_REPORT_RENDER_INTERNAL_HTML_CHARTS_H_
