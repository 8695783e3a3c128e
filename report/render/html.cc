// ReportToHtml: the page's parts in reading order (header, verdict, chain, charts, what-if,
// notes). Plain string building: every text from the report goes through HtmlEscape, every
// number through absl::StrFormat. The SVG charts carry no xmlns attribute (inline SVG in HTML
// needs none), so the page names no URL at all.
#include "report/render/html.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline/transforms/transform_chain.h"
#include "report/format.h"
#include "report/render/internal/html_charts.h"
#include "report/stages.h"

namespace sluice {
namespace {

using report_html_internal::Bar;
using report_html_internal::EpochChart;
using report_html_internal::TimelineChart;

// The page's CSS. .ops: a transform op's canonical text is long and has few spaces
// ("RandomHorizontalFlip(p=0.5)"), wider than a box of the chain: it breaks anywhere instead of
// running out of its box.
constexpr char kStyle[] = R"css(
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:20px 24px;color:#222;background:#f6f6f4}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:15px;margin:0 0 8px;color:#333}
.meta{color:#555;font-size:13px}
.verdict{border-left:6px solid #d62728;background:#fff;padding:10px 14px;margin:14px 0;
  font-size:15px;line-height:1.4}
.chain{display:flex;align-items:stretch;margin:18px 0 18px}
.stage{flex:1 1 0;min-width:0;background:#fff;border:2px solid #b8b8b8;border-radius:8px;
  padding:9px 10px;font-size:12.5px;position:relative;line-height:1.45}
.stage h3{margin:0 0 4px;font-size:15px}
.stage.limit{border:4px solid #d62728;background:#fff1f0;padding:7px 8px}
.stage.absent{background:#ececec;color:#8a8a8a;border-style:dashed}
.na{font-weight:700;font-size:14px}
.arrow{align-self:center;padding:0 3px;color:#999;font-size:18px}
.bar{height:10px;background:#e3e3e3;border-radius:5px;overflow:hidden;margin:5px 0 1px}
.fill{height:100%;background:#4c78a8}
.fill.occ{background:#72b7b2}
.limit .fill{background:#d62728}
.small{color:#666;font-size:11.5px}
.badge{position:absolute;top:-12px;right:8px;background:#d62728;color:#fff;font-size:11px;
  font-weight:700;padding:1px 7px;border-radius:4px;letter-spacing:.5px}
.row{display:flex;gap:18px;flex-wrap:wrap;margin-bottom:16px}
.panel{background:#fff;border:1px solid #d8d8d8;border-radius:8px;padding:10px 14px}
.panel .small{max-width:820px}
.notes{flex:1 1 0;min-width:300px}
.whatif{max-width:440px}
td.small{text-align:left}
table{border-collapse:collapse;font-size:13px}
td,th{padding:3px 10px;text-align:right}
th{background:#efefef}
td:first-child,th:first-child{text-align:left}
tr.best td{font-weight:700;color:#d62728}
svg text{font-family:"DejaVu Sans",Arial,sans-serif;font-size:11px;fill:#444}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
ul{margin:4px 0;padding-left:20px;font-size:12.5px}
.ops{overflow-wrap:anywhere}
)css";

std::string Pct(double fraction) {
  return absl::StrFormat("%.0f%%", 100 * std::clamp(fraction, 0.0, 1.0));
}

std::string DisplayName(Stage s) {
  const ReportStageInfo* info = FindReportStage(s);
  return info != nullptr ? info->title : std::string(StageName(s));
}

// Why a stage has no figures in this run.
std::string AbsentReason(const BottleneckReport& rep, Stage s) {
  switch (s) {
    case Stage::kH2D:
      return rep.on_device ? "no copies were recorded (made free by --what-if?)"
                           : "batches stay in host memory: there is no copy on the CPU backend";
    case Stage::kPinnedWait:
      return "this run had no pool of pinned batch buffers";
    case Stage::kCompute:
      return "no step was trained";
    case Stage::kDecode:
      return "the records are not encoded images (or a cached decoded copy stood in for them)";
    default:
      return "no items were recorded (the stage was made free, e.g. by --what-if)";
  }
}

// The box's opening tag; `limit` marks the limiting link.
std::string OpenBox(std::string_view name, bool present, bool limit) {
  std::string out = absl::StrFormat("<div class=\"stage%s%s\" data-stage=\"%s\" data-limit=\"%s\">",
                                    limit ? " limit" : "", present ? "" : " absent",
                                    HtmlEscape(name), limit ? "true" : "false");
  if (limit) absl::StrAppend(&out, "<div class=\"badge\">LIMIT</div>");
  return out;
}

std::string AbsentBox(std::string_view name, std::string_view title, const std::string& why) {
  return absl::StrCat(OpenBox(name, false, false), "<h3>", HtmlEscape(title),
                      "</h3><div class=\"na\">n/a</div><div class=\"small\">", HtmlEscape(why),
                      "</div></div>");
}

// Rate against capacity, and the ceiling when one was measured.
std::string RateFigures(const StageRow& r) {
  std::string out = absl::StrCat("rate <b>", FormatRate(r.samples_per_s), "</b><br>");
  if (!r.capacity_samples_per_s) return absl::StrCat(out, "capacity -<br>");
  const double cap = *r.capacity_samples_per_s;
  absl::StrAppend(&out, "capacity <b>", FormatRate(cap), "</b>",
                  Bar(cap > 0 ? r.samples_per_s / cap : 0), "<div class=\"small\">",
                  Pct(cap > 0 ? r.samples_per_s / cap : 0), " of capacity used</div>");
  if (r.ceiling_samples_per_s) {
    absl::StrAppend(&out, "<div class=\"small\">ceiling ", FormatRate(*r.ceiling_samples_per_s));
    if (r.pct_of_ceiling) absl::StrAppendFormat(&out, " (at %.0f%% of it)", *r.pct_of_ceiling);
    absl::StrAppend(&out, "</div>");
  }
  return out;
}

// The transform chain's ops and their shares of the preprocess busy time, in chain order.
std::string ChainOpsList(const StageRow& r) {
  if (!r.ops) return "";
  std::string out = "<div class=\"small ops\">transforms, of busy time:<ul>";
  for (const ChainOpShare& o : *r.ops) {
    absl::StrAppendFormat(&out, "<li>%.0f%% %s</li>", o.share_pct, HtmlEscape(o.op));
  }
  absl::StrAppendFormat(&out, "<li>%.0f%% outside the chain</li></ul>sampled 1 in %d samples</div>",
                        r.outside_chain_pct.value_or(0), TransformChain::kTimingStride);
  return out;
}

// Each item's wall time: "item p50 1.20 ms, p99 3.40 ms, max 5.10 ms per frame".
std::string LatencyLine(const StageRow& r) {
  const std::string l = FormatItemLatency(r);
  return l.empty() ? l
                   : absl::StrCat("<div class=\"small latency\">item ", HtmlEscape(l), "</div>");
}

std::string StageBox(const BottleneckReport& rep, const StageRow& r, bool limit) {
  const std::string name(StageName(r.stage));
  if (!r.present) return AbsentBox(name, DisplayName(r.stage), AbsentReason(rep, r.stage));
  std::string out = absl::StrCat(OpenBox(name, true, limit), "<h3>", DisplayName(r.stage), "</h3>");
  if (r.stage == Stage::kPinnedWait) {
    // Occupancy is buffers, not a rate: its own unit, its own colour.
    const uint32_t pool = rep.pipeline.pool_buffers;
    absl::StrAppendFormat(&out, "pool <b>%d buffers</b><br>at most <b>%d</b> in use", pool,
                          r.queue_high_water);
    absl::StrAppend(
        &out, Bar(pool > 0 ? static_cast<double>(r.queue_high_water) / pool : 0, "fill occ"),
        absl::StrFormat("<div class=\"small\">a batch waited for a buffer %.0f%% of the time "
                        "(%.1f batches waiting on average); that held the run back only as far "
                        "as compute "
                        "waited (%.0f%%)</div>",
                        r.busy_pct, r.batches_waiting_avg, rep.input_bound_pct),
        LatencyLine(r), "</div>");
    return out;
  }
  if (r.stage == Stage::kH2D) {
    absl::StrAppend(&out, "<div class=\"small\">on the copy stream",
                    rep.copy_hidden_pct ? absl::StrFormat("; %.0f%% of copy time hidden behind "
                                                          "compute",
                                                          *rep.copy_hidden_pct)
                                        : "",
                    "</div>");
  } else if (r.stage == Stage::kCompute && rep.on_device) {
    absl::StrAppend(&out, "<div class=\"small\">on the device's compute stream</div>");
  } else {
    absl::StrAppendFormat(&out, "<div class=\"small\">%d %s</div>", r.concurrency,
                          r.concurrency == 1 ? "thread" : "threads");
  }
  absl::StrAppend(&out, RateFigures(r), ChainOpsList(r), LatencyLine(r));
  if (r.stage == Stage::kCompute) {
    absl::StrAppendFormat(&out,
                          "<div class=\"small\">waited for input %.1f%% of training time</div>",
                          rep.input_bound_pct);
  }
  return absl::StrCat(out, "</div>");
}

std::string ExchangeBox(const BottleneckReport& rep, bool limit) {
  if (!rep.exchange) {
    return AbsentBox("exchange", "exchange",
                     "one process: gradients are exchanged only in data-parallel runs");
  }
  const ExchangeFigures& x = *rep.exchange;
  std::string out = absl::StrCat(OpenBox("exchange", true, limit), "<h3>exchange</h3>");
  absl::StrAppendFormat(&out, "<div class=\"small\">%d ranks, %.1f MB per step</div>", x.world_size,
                        x.bytes_per_step / 1e6);
  if (x.time_per_step_us)
    absl::StrAppendFormat(&out, "<b>%.0f us</b> per step<br>", *x.time_per_step_us);
  absl::StrAppendFormat(&out, "<b>%.1f%%</b> of training time (straggler: %.1f%%)", x.train_pct,
                        x.pure_pct);
  if (x.achieved_gb_per_s && x.ceiling.measured && x.ceiling.gb_per_s > 0) {
    absl::StrAppend(&out, Bar(*x.achieved_gb_per_s / x.ceiling.gb_per_s));
    absl::StrAppendFormat(&out, "<div class=\"small\">%.2f of %.2f GB/s all-reduce ceiling</div>",
                          *x.achieved_gb_per_s, x.ceiling.gb_per_s);
  }
  return absl::StrCat(out, "</div>");
}

std::string Chain(const BottleneckReport& rep) {
  const bool no_data = rep.verdict == VerdictClass::kNoData;
  const bool exchange_limits = rep.verdict == VerdictClass::kCommunicationBound;
  std::string out = "<div class=\"chain\" id=\"chain\">";
  // The report's rows in flow order; kDelivery has no box (compute stands for the consumer).
  for (const ReportStageInfo& info : kReportStageTable) {
    const Stage s = info.stage;
    const StageRow& r = rep.row(s);
    absl::StrAppend(&out, StageBox(rep, r, !no_data && !exchange_limits && rep.limiting_stage == s),
                    "<div class=\"arrow\">&#8594;</div>");
  }
  return absl::StrCat(out, ExchangeBox(rep, exchange_limits), "</div>");
}

std::string Header(const BottleneckReport& rep, const HtmlExtras& extras) {
  std::string out = absl::StrCat("<h1>", HtmlEscape(extras.title), "</h1><div class=\"meta\">",
                                 HtmlEscape(rep.device));
  absl::StrAppendFormat(&out,
                        " &middot; %d cores &middot; %.3f s of training &middot; %d samples "
                        "in %d steps &middot; measured <b>%s</b> &middot; predicted %s",
                        rep.cores, rep.train_seconds, rep.samples, rep.steps,
                        FormatRate(rep.measured_samples_per_s),
                        FormatRate(rep.predicted_samples_per_s));
  absl::StrAppendFormat(&out, " &middot; %.2f threads busy on %d cores</div>", rep.cpu_threads_busy,
                        rep.cores);
  const std::string limit = rep.verdict == VerdictClass::kCommunicationBound
                                ? "exchange"
                                : std::string(StageName(rep.limiting_stage));
  absl::StrAppend(&out, "<p class=\"verdict\" id=\"verdict\" data-class=\"",
                  VerdictClassName(rep.verdict), "\" data-limiting-stage=\"",
                  rep.verdict == VerdictClass::kNoData ? "" : limit, "\">",
                  HtmlEscape(rep.sentence), "</p>");
  return out;
}

// Whether a measured what-if row of `s` can name the limit, as Decide reads the table
// (report/decide/what_if_verdict.cc): the transform chain alone is a part of preprocess that
// never does (preprocess frees the whole stage, chain included).
bool RowCanNameTheLimit(Stage s) { return s != Stage::kTransforms; }

// Why `r`, a measured row that gained more than the bold row of `named` (the verdict's stage,
// or its whole), does not contradict the verdict's `limit`; "" when no part-whole relation
// explains it (Decide makes the fastest row's stage the limit, so none is left).
std::string WhyNotTheLimit(const WhatIfRow& r, Stage named, Stage limit) {
  const Stage s = *r.free_stage;
  const std::string stage(StageName(s)), part(StageName(limit));
  if (PartOf(limit) == s && named == limit) {
    // The verdict names a part (decode) whose own row gained less than its whole's.
    return absl::StrFormat(
        "%s is a part of %s: freeing %s (%.2fx) frees %s and the rest of %s too, so its row "
        "gains more and confirms %s, the part that takes most of %s's time",
        part, stage, stage, r.speedup, part, stage, part, stage);
  }
  if (const std::optional<Stage> whole = PartOf(s); whole && !RowCanNameTheLimit(s)) {
    return absl::StrFormat(
        "%s (%.2fx) is a part of %s measured alone: its row never names the limit; the %s row "
        "stands for the whole stage",
        stage, r.speedup, StageName(*whole), StageName(*whole));
  }
  return "";
}

// The what-if table, with the row of the stage the verdict names in bold: the LIMIT box's
// stage (Decide already reconciled the verdict with the table). A part the verdict names
// (decode, in preprocess) is confirmed by its whole's row when it has no row of its own; a row
// that gained more than the bold one is a whole or a part of it, and the caption says which,
// so the page never reads as if the bold row and the largest speedup disagree.
std::string WhatIfTable(const std::vector<WhatIfRow>& rows, const BottleneckReport& rep) {
  if (rows.empty()) return "";
  double best = 0;
  bool named_has_row = false;
  for (const WhatIfRow& r : rows) {
    if (r.note.empty() && r.free_stage) best = std::max(best, r.speedup);
    named_has_row |= r.note.empty() && r.free_stage == rep.limiting_stage;
  }
  // A part named without a what-if row of its own is confirmed by its whole's row.
  const std::optional<Stage> whole = PartOf(rep.limiting_stage);
  const Stage named = !named_has_row && whole ? *whole : rep.limiting_stage;
  const bool has_verdict =
      rep.verdict != VerdictClass::kNoData && rep.verdict != VerdictClass::kCommunicationBound;
  std::string out =
      "<div class=\"panel whatif\"><h2>What if a stage were free (--what-if=all)</h2>"
      "<table id=\"what-if\"><tr><th>free stage</th><th>samples/s</th><th>speedup</th>"
      "<th></th></tr>";
  double named_speedup = 0;
  for (const WhatIfRow& r : rows) {
    const std::string name = WhatIfRowName(r);
    if (!r.note.empty()) {
      absl::StrAppend(&out, "<tr><td>", HtmlEscape(name), "</td><td colspan=\"3\" class=\"small\">",
                      HtmlEscape(r.note), "</td></tr>");
      continue;
    }
    const bool is_named = has_verdict && r.free_stage == named;
    if (is_named) named_speedup = r.speedup;
    absl::StrAppendFormat(&out,
                          "<tr%s><td>%s</td><td>%.0f</td><td>%.2fx</td><td style=\"width:110px\">"
                          "%s</td></tr>",
                          is_named ? " class=\"best\"" : "", HtmlEscape(name), r.samples_per_s,
                          r.speedup, Bar(best > 0 ? r.speedup / best : 0));
  }
  std::string caption =
      "each stage made free in turn; the one whose removal speeds the run up most is the limit";
  if (has_verdict) {
    absl::StrAppend(&caption, "; in bold, the row of the stage the verdict names (",
                    StageName(rep.limiting_stage), ")");
    if (named != rep.limiting_stage) {
      absl::StrAppend(&caption, ": ", StageName(rep.limiting_stage), " is a part of ",
                      StageName(named), ", so freeing ", StageName(named), " frees it too");
    }
    for (const WhatIfRow& r : rows) {
      if (!r.note.empty() || !r.free_stage || *r.free_stage == named ||
          r.speedup <= named_speedup) {
        continue;
      }
      if (std::string why = WhyNotTheLimit(r, named, rep.limiting_stage); !why.empty()) {
        absl::StrAppend(&caption, ". ", why);
      }
    }
  }
  return absl::StrCat(out, "</table><div class=\"small\" id=\"what-if-caption\">",
                      HtmlEscape(caption), "</div></div>");
}

std::string Notes(const BottleneckReport& rep) {
  std::string out = absl::StrFormat(
      "<div class=\"panel notes\"><h2>Resources</h2><div class=\"small\">pool %d pinned buffers, "
      "frame "
      "budget %d, device ring %d; slowest capacity %s; CPU limit %s on %d cores</div>",
      rep.pipeline.pool_buffers, rep.pipeline.frame_budget, rep.pipeline.ring_depth,
      FormatRate(rep.capacity_limit_samples_per_s), FormatRate(rep.cpu_limit_samples_per_s),
      rep.cores);
  if (!rep.notes.empty()) {
    absl::StrAppend(&out, "<ul>");
    for (const std::string& n : rep.notes) absl::StrAppend(&out, "<li>", HtmlEscape(n), "</li>");
    absl::StrAppend(&out, "</ul>");
  }
  return absl::StrCat(out, "</div>");
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

HtmlExtras HtmlExtrasFromRun(const RunRecord& run) {
  HtmlExtras e;
  e.epochs = run.epochs;
  e.timeline = run.compute.timeline;
  return e;
}

std::string ReportToHtml(const BottleneckReport& report, const HtmlExtras& extras) {
  std::string out =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
                   HtmlEscape(extras.title), "</title><style>", kStyle, "</style></head><body>\n");
  // Sized for one 1400 x 1000 screen: the experiment beside the timeline, then the epochs
  // beside the resources.
  absl::StrAppend(&out, Header(report, extras), "\n", Chain(report), "\n<div class=\"row\">",
                  WhatIfTable(extras.what_if, report), TimelineChart(extras.timeline), "</div>\n");
  absl::StrAppend(&out, "<div class=\"row\">", EpochChart(extras.epochs), Notes(report),
                  "</div>\n</body></html>\n");
  return out;
}

}  // namespace sluice
