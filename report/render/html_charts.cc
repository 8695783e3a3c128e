// The HTML report's SVG charts: the rate per epoch and the compute/wait timeline.
#include "report/render/internal/html_charts.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::report_html_internal {
namespace {

// A chart's SVG size and the plot area inside it.
struct Frame {
  int width = 0, height = 0;
  static constexpr int kLeft = 64, kRight = 16, kTop = 12, kBottom = 36;
  int plot_w() const { return width - kLeft - kRight; }
  int plot_h() const { return height - kTop - kBottom; }
  int bottom() const { return kTop + plot_h(); }
};
constexpr Frame kEpochFrame{440, 210};
constexpr Frame kTimelineFrame{780, 210};
constexpr char kComputeColour[] = "#4c78a8";
constexpr char kWaitColour[] = "#f58518";
constexpr char kOtherColour[] = "#bab0ac";

std::string CompactRate(double v) {
  if (v >= 1e6) return absl::StrFormat("%.3g M", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.3g k", v / 1e3);
  return absl::StrFormat("%.3g", v);
}

// The smallest of 1, 2, 2.5, 5 x 10^k that divides [0, max] into at most four steps.
double NiceStep(double max) {
  const double raw = max / 4;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

// `attributes`: more attributes for the <svg> tag, each with a leading space.
std::string OpenSvg(const Frame& f, const char* id, const char* label,
                    const std::string& attributes = "") {
  return absl::StrFormat(
      "<svg id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
      "aria-label=\"%s\"%s>",
      id, f.width, f.height, f.width, f.height, label, attributes);
}

// A horizontal grid line at `y` with `label` left of the axis.
std::string GridLine(const Frame& f, double y, const std::string& label) {
  return absl::StrFormat(
      "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
      "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>",
      f.kLeft, f.kLeft + f.plot_w(), y, y, f.kLeft - 6, y + 4, label);
}

std::string Axes(const Frame& f, const char* x_title, const char* y_title) {
  return absl::StrFormat(
      "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>"
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>"
      "<text x=\"12\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 12 %d)\">%s</text>",
      f.kLeft, f.kLeft + f.plot_w(), f.bottom(), f.bottom(), f.kLeft + f.plot_w() / 2, f.height - 4,
      x_title, f.kTop + f.plot_h() / 2, f.kTop + f.plot_h() / 2, y_title);
}

std::string Rect(double x, double y, double w, double h, const char* colour) {
  return absl::StrFormat("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>",
                         x, y, w, h, colour);
}

std::string LegendItem(const char* colour, const char* text) {
  return absl::StrFormat("<span style=\"background:%s\"></span>%s", colour, text);
}

}  // namespace

std::string Bar(double fraction, const char* fill_class) {
  return absl::StrFormat("<div class=\"bar\"><div class=\"%s\" style=\"width:%.1f%%\"></div></div>",
                         fill_class, 100 * std::clamp(fraction, 0.0, 1.0));
}

std::string EpochChart(const std::vector<EpochRate>& epochs) {
  std::string out = "<div class=\"panel\"><h2>Throughput per epoch (samples/s)</h2>";
  double max = 0;
  for (const EpochRate& e : epochs) max = std::max(max, e.samples_per_s);
  if (epochs.empty() || max <= 0) {
    return absl::StrCat(out, "<div class=\"small\">no epoch was completed in this run</div></div>");
  }
  const Frame& f = kEpochFrame;
  const double step = NiceStep(max);
  const double top = std::ceil(max / step) * step;
  absl::StrAppend(&out, OpenSvg(f, "epochs", "samples per second in each epoch"));
  for (double v = 0; v <= top + step / 2; v += step) {
    absl::StrAppend(&out, GridLine(f, f.kTop + f.plot_h() * (1 - v / top), CompactRate(v)));
  }
  const int n = static_cast<int>(epochs.size());
  const double band = static_cast<double>(f.plot_w()) / n;
  const int label_every = (n + 19) / 20;
  for (int i = 0; i < n; ++i) {
    const EpochRate& e = epochs[i];
    const double h = f.plot_h() * e.samples_per_s / top;
    const double x = f.kLeft + i * band;
    absl::StrAppend(&out, Rect(x + band * 0.15, f.bottom() - h, band * 0.7, h, kComputeColour));
    if (n <= 12) {
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
                            x + band / 2, f.bottom() - h - 4, CompactRate(e.samples_per_s));
    }
    if (i % label_every == 0) {
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>",
                            x + band / 2, f.bottom() + 14, e.epoch + 1);
    }
  }
  return absl::StrCat(out, Axes(f, "epoch", "samples/s"), "</svg></div>");
}

std::string TimelineChart(const ComputeTimeline& t) {
  std::string out = "<div class=\"panel\"><h2>Compute against waiting over the run</h2>";
  const int used = t.used();
  if (used == 0) {
    return absl::StrCat(out, "<div class=\"small\">no step was timed in this run</div></div>");
  }
  const Frame& f = kTimelineFrame;
  // The axis's exact span, for tools and tests (the tick labels are rounded).
  const double span_s = (t.end_ns - t.origin_ns) / 1e9;
  absl::StrAppend(&out, OpenSvg(f, "timeline", "share of wall time computing and waiting",
                                absl::StrFormat(" data-seconds=\"%.6f\"", span_s)));
  for (int pct : {0, 50, 100}) {
    absl::StrAppend(&out,
                    GridLine(f, f.kTop + f.plot_h() * (1 - pct / 100.0), absl::StrCat(pct, "%")));
  }
  const double band = static_cast<double>(f.plot_w()) / used;
  bool evaluated = false;
  for (int i = 0; i < used; ++i) {
    evaluated = evaluated || t.other_ns[i] > 0;
    const int64_t lo = t.origin_ns + i * t.bucket_ns;
    const double covered = static_cast<double>(std::min(lo + t.bucket_ns, t.end_ns) - lo);
    if (covered <= 0) continue;
    const double compute = std::clamp(t.compute_ns[i] / covered, 0.0, 1.0);
    const double other = std::clamp(t.other_ns[i] / covered, 0.0, 1.0 - compute);
    const double x = f.kLeft + i * band, w = band + 0.3;  // overlap: no hairline gaps
    const double compute_h = f.plot_h() * compute, other_h = f.plot_h() * other;
    absl::StrAppend(&out, Rect(x, f.kTop, w, f.plot_h() - compute_h - other_h, kWaitColour),
                    Rect(x, f.bottom() - compute_h - other_h, w, other_h, kOtherColour),
                    Rect(x, f.bottom() - compute_h, w, compute_h, kComputeColour));
  }
  for (int k = 0; k <= 4; ++k) {
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%.3g s</text>",
                          f.kLeft + f.plot_w() * k / 4.0, f.bottom() + 14,
                          k == 0   ? "start"
                          : k == 4 ? "end"
                                   : "middle",
                          span_s * k / 4);
  }
  // An opened timeline starts where the report's span does (the Python loader's pass: when it
  // asked for the first batch), so the wait before the first step is on the axis.
  absl::StrAppend(&out,
                  Axes(f,
                       t.from_span_start ? "time since the first batch was asked for"
                                         : "time since the first step",
                       "share of wall time"),
                  "</svg>");
  absl::StrAppendFormat(
      &out,
      "<div class=\"small legend\">%s%s%s</div><div class=\"small\">per bucket of %.3g ms: the "
      "share of wall time the steps ran, evaluation ran, and the rest: time between steps "
      "(waiting for input, and the host's own work)%s%s</div></div>",
      LegendItem(kComputeColour, "compute"), LegendItem(kWaitColour, "between steps (waiting)"),
      LegendItem(kOtherColour, "evaluation"), t.bucket_ns / 1e6,
      t.from_span_start ? "; from the start of the report's span, the wait for the first batch "
                          "included, to the end of the last step"
                        : "",
      evaluated ? "; the axis is the whole run, evaluation included, while the report's "
                  "figures are of the training time alone (without the evaluations)"
                : "");
  return out;
}

}  // namespace sluice::report_html_internal
