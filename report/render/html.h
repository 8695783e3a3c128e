// The bottleneck report as one self-contained HTML page (sluice-train --report-html,
// sluice.Loader.report_html): no network and no script, only inline CSS and SVG, so the file
// opens anywhere and can be attached to a bug report. docs/bottleneck.md, "The picture".
//
//   HtmlExtras extras = HtmlExtrasFromRun(result.run);  // epochs and the timeline
//   extras.what_if = ...;                                // --what-if=all, when it ran
//   std::string page = ReportToHtml(report, extras);
//
// The page shows the chain (read, decompress, preprocess, pinned buffers, h2d, compute,
// exchange) as boxes, each with its rate against its capacity; the verdict; the what-if table;
// the rate per epoch; and a timeline of compute against the time between steps. Every figure
// is one the report (BottleneckReport) or the RunRecord already holds; the page computes none
// of its own except the timeline's per-bucket shares.
//
// The DOM is part of the contract (tests read it): each box is
// `<div class="stage ..." data-stage="NAME" data-limit="true|false">` (NAME as in the JSON's
// "stage", plus "exchange"); exactly one box, the report's limiting stage, has class `limit`
// and data-limit="true" (none when the run trained nothing); a stage absent from the run has
// class `absent` and says why; the verdict is `<p id="verdict" data-limiting-stage="NAME">`;
// the what-if table is `<table id="what-if">` (the verdict's row has class `best`) with its
// caption in `<div id="what-if-caption">`; the timeline is `<svg id="timeline"
// data-seconds="S">`, S the span its axis covers.
// Every text inserted is HTML-escaped. Thread safety: plain functions.
#ifndef SLUICE_REPORT_RENDER_HTML_H_
#define SLUICE_REPORT_RENDER_HTML_H_

#include <string>
#include <string_view>
#include <vector>

#include "report/analysis/bottleneck_report.h"
#include "report/record/run_record.h"
#include "report/record/what_if_rows.h"

namespace sluice {

// What the page shows beside the report.
struct HtmlExtras {
  std::string title = "sluice bottleneck report";
  std::vector<EpochRate> epochs;   // empty: no per-epoch chart
  ComputeTimeline timeline;        // empty: no timeline
  std::vector<WhatIfRow> what_if;  // empty: no what-if table
};

// The epochs and the timeline of a run.
HtmlExtras HtmlExtrasFromRun(const RunRecord& run);

// The page. The limiting box is report.limiting_stage, or the exchange when the verdict is
// communication-bound.
std::string ReportToHtml(const BottleneckReport& report, const HtmlExtras& extras);

// `text` with & < > " ' replaced by their character references.
std::string HtmlEscape(std::string_view text);

}  // namespace sluice

#endif  // SLUICE_REPORT_RENDER_HTML_H_
