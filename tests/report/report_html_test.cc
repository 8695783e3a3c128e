// The HTML page of the bottleneck report (report_html.h): its DOM contract (one box per stage,
// exactly the limiting one marked), the reasons on absent stages, escaping, and no URL. The
// rendering in a real browser is tests/tools/report_html_browser_test.py.
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/decide/decide.h"
#include "report/render/html.h"
#include "report/stages.h"
#include "synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::MakeRun;
using synthetic_run::Synth;

struct Box {
  std::string classes;
  std::string stage;
  bool limit = false;
};

// Every stage box of the page, in document order.
std::vector<Box> Boxes(const std::string& html) {
  static const std::regex kBox(
      R"re(<div class="stage([^"]*)" data-stage="([^"]*)" data-limit="(true|false)">)re");
  std::vector<Box> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), kBox); it != std::sregex_iterator();
       ++it) {
    out.push_back({(*it)[1].str(), (*it)[2].str(), (*it)[3].str() == "true"});
  }
  return out;
}

std::vector<std::string> Limits(const std::string& html) {
  std::vector<std::string> out;
  for (const Box& b : Boxes(html)) {
    if (b.limit) out.push_back(b.stage);
  }
  return out;
}

BottleneckReport DecompressBound() {
  Synth s;
  s.decompress_ns = 4000;  // 2,000 ns per sample on 2 threads: far slower than compute
  s.wait_pct = 60;
  return AnalyzeRun(MakeRun(s), nullptr, 8);
}

TEST(ReportHtml, ShowsTheChainInFlowOrder) {
  const std::vector<Box> boxes = Boxes(ReportToHtml(DecompressBound(), HtmlExtras{}));
  std::vector<std::string> order;
  for (const Box& b : boxes) order.push_back(b.stage);
  std::vector<std::string> rows;
  for (const StageInfo& info : kReportStageTable) rows.emplace_back(info.name);
  rows.emplace_back("exchange");  // the data-parallel exchange, after compute
  EXPECT_EQ(order, rows);
}

TEST(ReportHtml, MarksOnlyTheLimitingStage) {
  const BottleneckReport rep = DecompressBound();
  ASSERT_EQ(rep.limiting_stage, Stage::kDecompress) << rep.sentence;
  const std::string html = ReportToHtml(rep, HtmlExtras{});
  EXPECT_EQ(Limits(html), std::vector<std::string>{"decompress"});
  for (const Box& b : Boxes(html)) {
    EXPECT_EQ(b.classes.find("limit") != std::string::npos, b.limit) << b.stage;
  }
  EXPECT_NE(html.find("data-limiting-stage=\"decompress\""), std::string::npos);
}

TEST(ReportHtml, ComputeBoundMarksCompute) {
  Synth s;
  s.wait_pct = 1;
  const BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 8);
  ASSERT_EQ(rep.limiting_stage, Stage::kCompute) << rep.sentence;
  EXPECT_EQ(Limits(ReportToHtml(rep, HtmlExtras{})), std::vector<std::string>{"compute"});
}

TEST(ReportHtml, CommunicationBoundMarksTheExchangeAlone) {
  BottleneckReport rep = DecompressBound();
  rep.verdict = VerdictClass::kCommunicationBound;
  rep.exchange = ExchangeFigures{};
  rep.exchange->world_size = 2;
  rep.exchange->train_pct = 40;
  const std::string html = ReportToHtml(rep, HtmlExtras{});
  EXPECT_EQ(Limits(html), std::vector<std::string>{"exchange"});
  EXPECT_NE(html.find("data-limiting-stage=\"exchange\""), std::string::npos);
}

TEST(ReportHtml, NoDataMarksNothing) {
  const BottleneckReport rep = AnalyzeRun(RunRecord{}, nullptr, 2);
  ASSERT_EQ(rep.verdict, VerdictClass::kNoData);
  EXPECT_TRUE(Limits(ReportToHtml(rep, HtmlExtras{})).empty());
}

TEST(ReportHtml, AbsentStagesAreGreyAndSayWhy) {
  const std::string html = ReportToHtml(DecompressBound(), HtmlExtras{});  // a CPU run
  for (const Box& b : Boxes(html)) {
    // The CPU run's absent rows, and the exchange box (data-parallel runs only).
    bool absent = b.stage == "exchange";
    for (const StageRow& r : DecompressBound().stages)
      absent |= !r.present && StageName(r.stage) == b.stage;
    EXPECT_EQ(b.classes.find("absent") != std::string::npos, absent) << b.stage;
  }
  EXPECT_NE(html.find("no copy on the CPU backend"), std::string::npos);
  EXPECT_NE(html.find("only in data-parallel runs"), std::string::npos);
  EXPECT_NE(html.find("the records are not encoded images"), std::string::npos);
}

TEST(ReportHtml, EscapesEveryTextFromTheReport) {
  BottleneckReport rep = DecompressBound();
  rep.sentence = "<script>alert('x')</script> & \"quoted\"";
  rep.device = "cpu <b>";
  rep.notes = {"<img src=x>"};
  HtmlExtras extras;
  extras.title = "a < b";
  extras.what_if = {{Stage::kH2D, "<u>note</u>", 0, 0}};
  const std::string html = ReportToHtml(rep, extras);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<u>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;"),
            std::string::npos);
  EXPECT_NE(html.find("cpu &lt;b&gt;"), std::string::npos);
}

TEST(ReportHtml, NamesNoUrlAndRunsNoScript) {
  HtmlExtras extras;
  extras.epochs = {{0, 1000, 0.5, 2000}, {1, 1000, 0.4, 2500}};
  extras.timeline.AddCompute(1'000'000'000, 1'300'000'000);
  extras.what_if = {{std::nullopt, "", 2000, 1}, {Stage::kDecompress, "", 5000, 2.5}};
  const std::string html = ReportToHtml(DecompressBound(), extras);
  EXPECT_EQ(html.find("http:"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<svg id=\"epochs\""), std::string::npos);
  EXPECT_NE(html.find("<svg id=\"timeline\""), std::string::npos);
  EXPECT_NE(html.find("<table id=\"what-if\""), std::string::npos);
}

// The bold row is the verdict's stage (which Decide reconciled with the table), never a row
// the renderer picks itself.
TEST(ReportHtml, WhatIfTableMarksTheRowOfTheVerdictsStage) {
  HtmlExtras extras;
  extras.what_if = {{std::nullopt, "", 2000, 1},
                    {Stage::kRead, "", 2100, 1.05},
                    {Stage::kDecompress, "", 5000, 2.5},
                    {Stage::kH2D, "no copy on the CPU backend", 0, 0}};
  const std::string html = ReportToHtml(DecompressBound(), extras);
  EXPECT_NE(html.find("<tr class=\"best\"><td>decompress</td>"), std::string::npos);
  EXPECT_EQ(html.find("<tr class=\"best\"><td>read</td>"), std::string::npos);
  EXPECT_NE(html.find("no copy on the CPU backend"), std::string::npos);
  EXPECT_NE(html.find("the row of the stage the verdict names (decompress)"), std::string::npos);
}

// A verdict naming decode, with no decode row: the preprocess row confirms it, and the page
// says why the bold row is not the LIMIT box's stage.
TEST(ReportHtml, WhatIfTableSaysWhyPreprocessConfirmsDecode) {
  BottleneckReport rep = DecompressBound();
  rep.limiting_stage = Stage::kDecode;
  HtmlExtras extras;
  extras.what_if = {{std::nullopt, "", 2000, 1},
                    {Stage::kPreprocess, "", 6000, 3.0},
                    {Stage::kCompute, "", 2200, 1.1}};
  const std::string html = ReportToHtml(rep, extras);
  EXPECT_NE(html.find("<tr class=\"best\"><td>preprocess</td>"), std::string::npos);
  EXPECT_NE(html.find("decode is a part of preprocess"), std::string::npos);
}

// The issue's table: the verdict names decode (its LIMIT box), decode has a row of its own
// (2.70x) and preprocess, its whole, gained more (3.61x), as did the chain alone. The bold row
// is decode's, and the caption says why the larger rows do not contradict it.
TEST(ReportHtml, WhatIfTableSaysWhyLargerRowsConfirmAPart) {
  Synth s;  // preprocess limits; decoding is 1.8 of its 2.4 us per sample
  s.preprocess_ns = 2400;
  s.decode_ns = 1800;
  const RunRecord run = MakeRun(s);
  BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  ASSERT_EQ(rep.limiting_stage, Stage::kDecode) << rep.sentence;
  HtmlExtras extras;
  extras.what_if = {{std::nullopt, "", 1000, 1},
                    {Stage::kDecode, "", 2700, 2.70},
                    {Stage::kPreprocess, "", 3610, 3.61},
                    {Stage::kCompute, "", 1100, 1.1},
                    {Stage::kTransforms, "", 4000, 4.0}};
  // As sluice-train does: the table reconciled with the verdict (preprocess confirms decode).
  ApplyVerdict(Decide({.analysis = &rep, .run = &run, .what_if = &extras.what_if}), &rep);
  ASSERT_EQ(rep.limiting_stage, Stage::kDecode) << rep.sentence;
  const std::string html = ReportToHtml(rep, extras);
  EXPECT_EQ(Limits(html), std::vector<std::string>{"decode"});
  EXPECT_NE(html.find("<tr class=\"best\"><td>decode</td>"), std::string::npos);
  EXPECT_EQ(html.find("<tr class=\"best\"><td>preprocess</td>"), std::string::npos);
  EXPECT_NE(html.find("decode is a part of preprocess: freeing preprocess (3.61x) frees decode"),
            std::string::npos);
  EXPECT_NE(html.find("transforms (4.00x) is a part of preprocess measured alone: its row never "
                      "names the limit"),
            std::string::npos);
  EXPECT_EQ(html.find("compute (1.10x)"), std::string::npos);  // gained less: nothing to say
}

TEST(ReportHtml, WithoutEpochsOrTimelineSaysSo) {
  const std::string html = ReportToHtml(DecompressBound(), HtmlExtras{});
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("no epoch was completed"), std::string::npos);
  EXPECT_NE(html.find("no step was timed"), std::string::npos);
  EXPECT_EQ(html.find("id=\"what-if\""), std::string::npos);  // no what-if table
}

// A timeline opened at the span's start (the Python loader's) spans it: a start-up wait of
// 100 ms, then 300 ms of back-to-back steps, is drawn as 400 ms, the first quarter waiting.
TEST(ReportHtml, OpenedTimelineDrawsTheWaitBeforeTheFirstStep) {
  HtmlExtras extras;
  const int64_t t0 = 1'000'000'000, ms = 1'000'000;
  extras.timeline.Open(t0);
  for (int64_t t = t0 + 100 * ms; t < t0 + 400 * ms; t += 10 * ms) {
    extras.timeline.AddCompute(t, t + 10 * ms);
  }
  const std::string html = ReportToHtml(DecompressBound(), extras);
  EXPECT_NE(html.find("data-seconds=\"0.400000\""), std::string::npos);
  EXPECT_NE(html.find("time since the first batch was asked for"), std::string::npos);
  // The compute bars' heights: none in the first quarter, full height after it.
  static const std::regex kCompute(R"re(height="([0-9.]+)" fill="#4c78a8")re");
  const size_t svg = html.find("<svg id=\"timeline\"");
  const std::string chart = html.substr(svg, html.find("</svg>", svg) - svg);
  std::vector<double> heights;
  for (auto it = std::sregex_iterator(chart.begin(), chart.end(), kCompute);
       it != std::sregex_iterator(); ++it) {
    heights.push_back(std::stod((*it)[1].str()));
  }
  ASSERT_FALSE(heights.empty());
  double mean = 0;
  for (double h : heights) mean += h / heights.size();
  EXPECT_EQ(heights.front(), 0);
  EXPECT_NEAR(mean / heights.back(), 0.75, 0.01);
  // Not opened (sluice-train), the axis starts at the first step, and says so.
  HtmlExtras train;
  train.timeline.AddCompute(t0 + 100 * ms, t0 + 400 * ms);
  const std::string from_step = ReportToHtml(DecompressBound(), train);
  EXPECT_NE(from_step.find("data-seconds=\"0.300000\""), std::string::npos);
  EXPECT_NE(from_step.find("time since the first step"), std::string::npos);
  EXPECT_EQ(from_step.find("evaluation included"), std::string::npos);
  // With an evaluation on the axis, the caption says the figures leave it out.
  train.timeline.AddOther(t0 + 400 * ms, t0 + 500 * ms);
  const std::string evaluated = ReportToHtml(DecompressBound(), train);
  EXPECT_NE(evaluated.find("the axis is the whole run, evaluation included, while the report's "
                           "figures are of the training time alone"),
            std::string::npos);
}

// The preprocess box lists the chain's ops with their shares, and the part outside the chain.
TEST(ReportHtml, PreprocessBoxListsTheChainsOps) {
  RunRecord run = MakeRun(Synth{});
  run.pipeline.chain_ops = {{"RandomCrop(32, padding=4)", 100 * 3750},
                            {"RandomHorizontalFlip(p=0.5)", 20 * 3750}};
  run.pipeline.chain_timed_samples = 3750;  // kSamples / 16
  const std::string html = ReportToHtml(AnalyzeRun(run, nullptr, 2), HtmlExtras{});
  const size_t box = html.find("data-stage=\"preprocess\"");
  ASSERT_NE(box, std::string::npos);
  const std::string pre = html.substr(box, html.find("data-stage=", box + 1) - box);
  EXPECT_NE(pre.find("<li>50% RandomCrop(32, padding=4)</li>"), std::string::npos) << pre;
  EXPECT_NE(pre.find("<li>10% RandomHorizontalFlip(p=0.5)</li>"), std::string::npos) << pre;
  EXPECT_NE(pre.find("<li>40% outside the chain</li>"), std::string::npos) << pre;
  const std::string plain = ReportToHtml(AnalyzeRun(MakeRun(Synth{}), nullptr, 2), HtmlExtras{});
  EXPECT_EQ(plain.find("outside the chain"), std::string::npos);
  // Op names are wider than a box: the list wraps them (the browser test measures it).
  EXPECT_NE(html.find("<div class=\"small ops\">"), std::string::npos);
  EXPECT_NE(html.find(".ops{overflow-wrap:anywhere}"), std::string::npos);
}

}  // namespace
}  // namespace sluice
