// The HTML page of the bottleneck report (report_html.h): its DOM contract (one box per stage,
// exactly the limiting one marked), the reasons on absent stages, escaping, and no URL. The
// rendering in a real browser is tests/tools/report_html_browser_test.py.
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
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

TEST(ReportHtml, WithoutEpochsOrTimelineSaysSo) {
  const std::string html = ReportToHtml(DecompressBound(), HtmlExtras{});
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("no epoch was completed"), std::string::npos);
  EXPECT_NE(html.find("no step was timed"), std::string::npos);
  EXPECT_EQ(html.find("id=\"what-if\""), std::string::npos);  // no what-if table
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
}

}  // namespace
}  // namespace sluice
