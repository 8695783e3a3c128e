// The bottleneck report on encoded images and over several epochs: the decode row (a part of
// preprocess, on its threads), the verdict that names decode when it is most of preprocess's
// work, its ceiling, and the first epoch against the later ones (cold: read from disk).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::kSamples;
using synthetic_run::MakeRun;
using synthetic_run::Synth;
using ::testing::HasSubstr;
using ::testing::Not;

// Preprocess limits the run (2 threads, 2.4 us per sample: 833 k samples/s); decoding is
// `decode_ns` of its 2.4 us.
Synth DecodingRun(double decode_ns) {
  Synth s;
  s.preprocess_ns = 2400;
  s.decode_ns = decode_ns;
  return s;
}

// A step of 2 threads on 2 cores, the largest consumer of them, decode most of the rest: the
// cores bind (a new user's tiny CNN).
Synth SharedCoresRun() {
  Synth s = DecodingRun(1000);
  s.preprocess_ns = 1200;
  s.compute_ns = 1400;
  s.compute_threads = 2;
  s.wait_pct = 0;
  return s;
}

// The half-side advice's price in `r` (0: not advised).
double ImageSidePrice(const BottleneckReport& r) {
  for (const Advice& a : r.advice) {
    if (a.setting == AdviceSetting::kImageSide) return a.predicted_speedup;
  }
  return 0.0;
}

TEST(DecodeReportTest, DecodeRowIsPartOfPreprocessAndNotCountedTwice) {
  const BottleneckReport plain = AnalyzeRun(MakeRun(DecodingRun(0)), nullptr, 16);
  const BottleneckReport rep = AnalyzeRun(MakeRun(DecodingRun(1800)), nullptr, 16);
  EXPECT_FALSE(plain.row(Stage::kDecode).present);
  const StageRow& d = rep.row(Stage::kDecode);
  const StageRow& pre = rep.row(Stage::kPreprocess);
  ASSERT_TRUE(d.present);
  EXPECT_FALSE(d.cpu_work);
  EXPECT_EQ(d.concurrency, pre.concurrency);
  EXPECT_EQ(d.items, kSamples);
  // Of the same threads' time: 1800 / 2400 of preprocess's busy share.
  EXPECT_NEAR(d.busy_pct, pre.busy_pct * 1800 / 2400, 1e-9);
  EXPECT_LT(d.busy_pct, pre.busy_pct);
  EXPECT_NEAR(pre.busy_pct + pre.wait_input_pct + pre.wait_output_pct, 100.0, 1e-9);
  EXPECT_EQ(d.wait_input_pct, 0);
  EXPECT_EQ(d.wait_output_pct, 0);
  EXPECT_EQ(d.attributed_wait_pct, 0);
  // What the two threads would decode doing nothing else.
  ASSERT_TRUE(d.capacity_samples_per_s.has_value());
  EXPECT_NEAR(*d.capacity_samples_per_s, 2e9 / 1800, 1e-6);
  // The CPU budget, the prediction and the wait attribution are those of the run without the
  // row: decoding is already in preprocess's busy time.
  EXPECT_DOUBLE_EQ(rep.cpu_threads_busy, plain.cpu_threads_busy);
  EXPECT_DOUBLE_EQ(rep.predicted_samples_per_s, plain.predicted_samples_per_s);
  EXPECT_DOUBLE_EQ(rep.capacity_limit_samples_per_s, plain.capacity_limit_samples_per_s);
  EXPECT_DOUBLE_EQ(pre.attributed_wait_pct, plain.row(Stage::kPreprocess).attributed_wait_pct);
}

// Decode runs on preprocess's threads: its cores are its share of their CPU time. Threads that
// waited for a core half their busy time (the step's thread on the same cores) made the decode
// row's wall time read 1.14 cores against preprocess's 0.80 of CPU, which contains it.
TEST(DecodeReportTest, DecodeCoresAreItsShareOfPreprocessCpuNeverMoreThanPreprocess) {
  RunRecord run = MakeRun(DecodingRun(1800));
  StageStats& pre_stats = run.pipeline.stages[static_cast<int>(Stage::kPreprocess)];
  pre_stats.cpu_ns = pre_stats.busy_ns / 2;
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  const StageRow& d = rep.row(Stage::kDecode);
  const StageRow& pre = rep.row(Stage::kPreprocess);
  ASSERT_TRUE(d.present);
  EXPECT_NEAR(d.cores_busy, pre.cores_busy * 1800 / 2400, 1e-6);
  EXPECT_LT(d.cores_busy, pre.cores_busy);
}

TEST(DecodeReportTest, VerdictNamesDecodeWhenItIsMostOfPreprocess) {
  BottleneckReport rep = AnalyzeRun(MakeRun(DecodingRun(1800)), nullptr, 16);
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_THAT(rep.sentence, HasSubstr("decode is the limit: it takes 75% of the busy time of "
                                      "preprocess, which runs at 833.3 k samples/s on 2 threads"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("preprocess is the limit")));
  ASSERT_EQ(rep.advice.size(), 2u) << rep.sentence;
  EXPECT_EQ(rep.advice.front().setting, AdviceSetting::kPreprocessThreads);
  EXPECT_EQ(rep.advice.front().value, "4");
  EXPECT_NEAR(rep.advice.front().predicted_speedup, 2.0, 0.01);  // 16 idle cores
  // Half the side: decode (75% of preprocess) decodes a quarter of the pixels.
  EXPECT_EQ(rep.advice[1].setting, AdviceSetting::kImageSide);
  EXPECT_NEAR(rep.advice[1].predicted_speedup, 1 / (1 - 0.75 * 0.75), 0.01);
  EXPECT_THAT(rep.sentence, HasSubstr("store the images at 0.5 of their side"));
  EXPECT_EQ(rep.ToJson()["verdict"]["advice"][1]["kind"], "data");
  EXPECT_EQ(rep.ToJson()["verdict"]["limiting_stage"], "decode");

  // A quarter of preprocess's time: preprocess itself is named, decode is not.
  rep = AnalyzeRun(MakeRun(DecodingRun(600)), nullptr, 16);
  EXPECT_EQ(rep.limiting_stage, Stage::kPreprocess);
  EXPECT_THAT(rep.sentence, HasSubstr("preprocess is the limit"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("decod")));
}

// A delay --inject-delay planted in each decode does not shrink with the pixels: when it is
// all of decode's time, smaller images are priced at no gain and not advised.
TEST(DecodeReportTest, APlantedDecodeDelayIsNotPricedAsPixels) {
  RunRecord run = MakeRun(DecodingRun(2000));
  BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  ASSERT_EQ(rep.limiting_stage, Stage::kDecode) << rep.sentence;
  const auto image_side = ImageSidePrice;
  EXPECT_GT(image_side(rep), 1.2) << rep.sentence;
  run.injected_delay_us = {{Stage::kDecode, 2}};  // 2 us per image: decode's whole 2000 ns
  rep = AnalyzeRun(run, nullptr, 16);
  ASSERT_EQ(rep.limiting_stage, Stage::kDecode) << rep.sentence;
  EXPECT_EQ(image_side(rep), 0.0) << rep.sentence;
}

// A new user halved their photos as advised, and the report advised halving again. Taken again
// and again, that ends below the transforms' output: not advised where the halved images
// would hold fewer pixels than a sample.
TEST(DecodeReportTest, SmallerImagesAreNotAdvisedBelowASamplesPixels) {
  auto advises_image_side = [](uint64_t decoded_bytes_per_image) {
    RunRecord run = MakeRun(DecodingRun(1800));
    run.h2d_format = H2DFormat::kF32;  // a sample: 784 bytes, 196 elements
    run.pipeline.stages[static_cast<int>(Stage::kDecode)].bytes =
        synthetic_run::kSamples * decoded_bytes_per_image;
    const BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
    EXPECT_EQ(rep.limiting_stage, Stage::kDecode) << rep.sentence;
    for (const Advice& a : rep.advice) {
      if (a.setting == AdviceSetting::kImageSide) return true;
    }
    return false;
  };
  EXPECT_TRUE(advises_image_side(150000));
  EXPECT_TRUE(advises_image_side(16 * 196));  // halved: twice a sample's side
  EXPECT_FALSE(advises_image_side(16 * 196 - 1));
  EXPECT_FALSE(advises_image_side(4 * 196));
  EXPECT_FALSE(advises_image_side(196));
  // A crop's window decoded 5% of each image: the images' stored size counts, not the window's.
  RunRecord run = MakeRun(DecodingRun(1800));
  run.h2d_format = H2DFormat::kF32;
  run.pipeline.decode_stored_bytes = synthetic_run::kSamples * 16 * 196;
  run.pipeline.stages[static_cast<int>(Stage::kDecode)].bytes =
      run.pipeline.decode_stored_bytes / 20;
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  bool advised = false;
  for (const Advice& a : rep.advice) advised = advised || a.setting == AdviceSetting::kImageSide;
  EXPECT_TRUE(advised) << rep.sentence;
}

// A Python step (torch's team of threads) ran far slower while the pipeline worked: most of
// its mean time is a wait the pipeline's load causes, and half-side images shrink the load.
// The run's fastest tenth of steps is the step alone; the rest scales with the pipeline's CPU
// time per sample times the rate (a new user's second halving was priced 1.36-1.44x and
// measured 1.72-2.05x while the model held the step's cost fixed).
TEST(DecodeReportTest, AForeignStepSlowedByThePipelineIsPricedToSpeedUpWithIt) {
  const auto image_side = ImageSidePrice;
  RunRecord run = MakeRun(SharedCoresRun());
  run.consumer = Consumer::kPython;
  run.compute.foreign_step = true;
  // Every step alike: the cost stays, as for sluice's own step (4300 / 3550 ns of CPU time
  // per sample, ComputeBoundOnSharedCoresPricesCheaperDecoding).
  EXPECT_NEAR(image_side(AnalyzeRun(run, nullptr, 2)), 4300.0 / 3550.0, 0.01);
  // 60% of the steps at a quarter of the mean (alone), 40% at 2.125x it: the same mean. The
  // step's 2800 ns of CPU time per sample is 700 alone plus 2100 of wait at the pipeline's
  // load, a wait that grows as the square of that load. Half side: the pipeline's 1500 ns
  // become 750, so at a rate x times the run's the load is 0.5x; the cores bind where
  // x (750 + 700 + 2100 x (0.5x)^2) = 4300 ns, x = 1.569 (the step's own time, 1400 ns per
  // sample x (0.25 + 0.75 x 0.25 x^2), allows more).
  const int64_t mean = run.compute.busy_ns / static_cast<int64_t>(run.compute.steps);
  run.compute.step_latency = LatencyHistogram();
  for (uint64_t i = 0; i < run.compute.steps; ++i) {
    run.compute.step_latency.Add(i % 5 < 3 ? mean / 4 : mean * 17 / 8);
  }
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  ASSERT_EQ(rep.limiting_stage, Stage::kCompute) << rep.sentence;
  EXPECT_NEAR(image_side(rep), 1.569, 0.03) << rep.sentence;
  // sluice's own step (not foreign) keeps its cost whatever its steps' spread.
  run.compute.foreign_step = false;
  run.consumer = Consumer::kTrainJob;
  EXPECT_NEAR(image_side(AnalyzeRun(run, nullptr, 2)), 4300.0 / 3550.0, 0.01);
}

// A Python step whose process took more CPU time than its thread ran a team of threads, and the
// report says so; an empty loop's few microseconds a sample are noise, not a team, and get no
// such note (a new user's empty loop was said to run on 2.0 cores).
TEST(DecodeReportTest, AForeignStepsTeamIsNotedOnlyWhenTheStepTakesAPartOfTheRun) {
  auto noted = [](const BottleneckReport& rep) {
    for (const std::string& n : rep.notes) {
      if (n.find("your step ran on about") != std::string::npos) return true;
    }
    return false;
  };
  Synth s = SharedCoresRun();
  s.compute_cpu_ns = 1400;  // the step's thread: one core's worth over its wall time
  RunRecord run = MakeRun(s);
  run.consumer = Consumer::kPython;
  run.compute.foreign_step = true;
  run.process_cores_busy = 2.0;  // the process kept both cores busy: the rest is the team's
  const BottleneckReport team = AnalyzeRun(run, nullptr, 2);
  EXPECT_TRUE(noted(team)) << team.sentence;
  Synth empty = s;
  empty.compute_ns = 2;  // an empty loop body
  empty.compute_cpu_ns = 2;
  RunRecord loop = MakeRun(empty);
  loop.consumer = Consumer::kPython;
  loop.compute.foreign_step = true;
  loop.process_cores_busy = 2.0;
  const BottleneckReport rep = AnalyzeRun(loop, nullptr, 2);
  EXPECT_FALSE(noted(rep)) << rep.sentence;
}

// A decode's part paid per image whatever its size stays when the images are stored smaller:
// the line through the run's (size, decode time) pairs tells it, where the sizes vary.
TEST(DecodeReportTest, HalfSideKeepsTheDecodesPartPaidPerImage) {
  // SaturatedCoresMakeDecodingCheaperNotMoreThreads's run: preprocess 80% of the CPU time,
  // decode 75% of preprocess.
  Synth s = DecodingRun(1800);
  s.compute_ns = 300;
  RunRecord run = MakeRun(s);
  const uint64_t images = run.pipeline[Stage::kDecode].items;
  ASSERT_GE(images, 64u);
  // Sizes 50-150% of their mean; each decode 40% a fixed cost and 60% in proportion to size.
  auto fit_with = [&](double spread) {
    PipelineStats::DecodeCostFit f;
    for (uint64_t i = 0; i < images; ++i) {
      const double x = 1e5 * (1 + spread * (static_cast<double>(i % 11) / 5 - 1));
      f.Add(x, 400 + 600 * x / 1e5);
    }
    return f;
  };
  const double pixels_only = 1 / (0.2 + 0.8 * (1 - 0.75 * 0.75));
  run.pipeline.decode_cost_fit = fit_with(0.5);
  BottleneckReport rep = AnalyzeRun(run, nullptr, /*cores=*/2);
  ASSERT_EQ(rep.advice.size(), 1u) << rep.sentence;
  ASSERT_EQ(rep.advice[0].setting, AdviceSetting::kImageSide);
  // decode is 75% of preprocess and 60% of it follows the size: 45% shrinks to a quarter.
  EXPECT_NEAR(rep.advice[0].predicted_speedup, 1 / (0.2 + 0.8 * (1 - 0.45 * 0.75)), 0.02);
  // Sizes all alike (within 5%): the line cannot be told from the noise, and pixels are all.
  run.pipeline.decode_cost_fit = fit_with(0.05);
  rep = AnalyzeRun(run, nullptr, 2);
  ASSERT_EQ(rep.advice.size(), 1u) << rep.sentence;
  EXPECT_NEAR(rep.advice[0].predicted_speedup, pixels_only, 0.02);
}

TEST(DecodeReportTest, SaturatedCoresMakeDecodingCheaperNotMoreThreads) {
  Synth s = DecodingRun(1800);
  s.compute_ns = 300;
  const BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  ASSERT_EQ(rep.verdict, VerdictClass::kCpuBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_THAT(rep.sentence, HasSubstr("decode is the limit: it takes 75% of the busy time"));
  EXPECT_THAT(rep.sentence, HasSubstr("; preprocess takes "));
  // No thread advice (the cores are full); the change to the data, priced: preprocess is 80%
  // of the CPU time and decode 75% of preprocess, so the cores' bound moves by
  // 1 / (0.2 + 0.8 x (1 - 0.75 x 0.75)).
  ASSERT_EQ(rep.advice.size(), 1u) << rep.sentence;
  EXPECT_EQ(rep.advice[0].setting, AdviceSetting::kImageSide);
  EXPECT_NEAR(rep.advice[0].predicted_speedup, 1 / (0.2 + 0.8 * (1 - 0.75 * 0.75)), 0.02);
  EXPECT_THAT(rep.sentence, HasSubstr("a change to the data, which a rerun cannot check"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("--preprocess-threads")));
}

// A new user's tiny CNN on 2 cores: their step (2 threads) is the largest consumer of the
// cores, decode most of the rest. The cores bind, so compute is named, and decoding cheaper
// gives compute cores back: the model prices half-side images (they measured 1.4x where the
// report had said only "compute-bound").
TEST(DecodeReportTest, ComputeBoundOnSharedCoresPricesCheaperDecoding) {
  Synth s = SharedCoresRun();
  const BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  ASSERT_EQ(rep.verdict, VerdictClass::kComputeBound) << rep.sentence;
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  ASSERT_EQ(rep.advice.size(), 1u) << rep.sentence;
  EXPECT_EQ(rep.advice[0].setting, AdviceSetting::kImageSide);
  // CPU per sample: read 100 + decompress 200 + preprocess 1200 + compute 2 x 1400 = 4300 ns
  // on 2 cores; half-side images make decode's 1000 ns 250: 3550 ns (compute's own threads
  // would do 2 / 2800 ns, more). So 4300 / 3550.
  EXPECT_NEAR(rep.advice[0].predicted_speedup, 4300.0 / 3550.0, 0.01) << rep.sentence;
  EXPECT_THAT(rep.sentence, HasSubstr("compute and the pipeline share the 2 cores, and the cores "
                                      "bind (the resource model): compute takes 65% of the CPU "
                                      "time per sample, preprocess 28% (most of it in decode), so "
                                      "a cheaper decode gives compute cores"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("headroom")));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("a faster step raises it")));
  EXPECT_THAT(rep.sentence, HasSubstr("store the images at 0.5 of their side"));

  // Compute alone on one thread binds by itself: cheaper decoding gives it nothing it could
  // use, and nothing is advised.
  s.compute_threads = 1;
  const BottleneckReport own = AnalyzeRun(MakeRun(s), nullptr, 2);
  EXPECT_EQ(own.verdict, VerdictClass::kComputeBound) << own.sentence;
  EXPECT_TRUE(own.advice.empty()) << own.sentence;
  EXPECT_THAT(own.sentence, Not(HasSubstr("store the images")));
}

TEST(DecodeReportTest, DecodeCeilingIsPerThreadUpToCores) {
  Ceilings c;
  c.decode.measured = true;
  c.decode.samples_per_s = 500000;  // one core's bare decoder
  BottleneckReport rep = AnalyzeRun(MakeRun(DecodingRun(1800)), &c, 16);
  const StageRow& d = rep.row(Stage::kDecode);
  ASSERT_TRUE(d.pct_of_ceiling.has_value());
  EXPECT_NEAR(*d.pct_of_ceiling, 100.0 * (2e9 / 1800) / (2 * 500000), 1e-9);
  EXPECT_THAT(rep.sentence, HasSubstr("of its ceiling on as many cores"));
  rep = AnalyzeRun(MakeRun(DecodingRun(1800)), &c, 1);
  EXPECT_NEAR(*rep.row(Stage::kDecode).pct_of_ceiling, 100.0 * (2e9 / 1800) / 500000, 1e-9);
}

TEST(DecodeReportTest, TextShowsDecodeInsidePreprocess) {
  Ceilings c;
  c.decode.measured = true;
  c.decode.samples_per_s = 1000;
  const std::string text = AnalyzeRun(MakeRun(DecodingRun(1800)), &c, 16).ToText();
  const size_t decode = text.find("\ndecode ");
  const size_t pre = text.find("\npreprocess ");
  ASSERT_NE(decode, std::string::npos) << text;
  EXPECT_LT(decode, pre);  // flow order
  EXPECT_THAT(text, HasSubstr("decode runs inside preprocess, on its 2 threads"));
  EXPECT_THAT(text, HasSubstr("(1.8 us each"));
  EXPECT_THAT(text, HasSubstr("ceiling: 1.0 k samples/s per core alone"));
  // A run without encoded images says so on the row.
  EXPECT_THAT(AnalyzeRun(MakeRun(DecodingRun(0)), nullptr, 16).ToText(),
              HasSubstr("decode      -- (not in this run)"));
}

// Three epochs of kSamples / 3 samples; the first at `first_rate`, the others at 3000/s; the
// reader `first_read_ns` on the first epoch's 30 MB, 10 ms on each later one's.
RunRecord ThreeEpochs(double first_rate, int64_t first_read_ns) {
  RunRecord run = MakeRun(Synth{});
  const uint64_t n = kSamples / 3;
  run.epochs = {
      {0, n, n / first_rate, first_rate}, {1, n, n / 3000.0, 3000}, {2, n, n / 3000.0, 3000}};
  run.pipeline.epoch_reads = {{0, 10, 30'000'000, first_read_ns},
                              {1, 10, 30'000'000, 10'000'000},
                              {2, 10, 30'000'000, 10'000'000}};
  return run;
}

TEST(DecodeReportTest, ColdFirstEpochIsSeparatedFromWarmOnes) {
  // 20 s against 6.7 s per later epoch; the reader 12 s against 10 ms: the disk explains it.
  const BottleneckReport rep = AnalyzeRun(ThreeEpochs(1000, 12'000'000'000), nullptr, 16);
  ASSERT_TRUE(rep.epoch_split.has_value());
  const EpochSplit& s = *rep.epoch_split;
  EXPECT_TRUE(s.differ);
  EXPECT_TRUE(s.cold);
  EXPECT_EQ(s.later_epochs, 2u);
  EXPECT_DOUBLE_EQ(s.later_samples_per_s, 3000);
  EXPECT_DOUBLE_EQ(s.first_read_mb_per_s, 2.5);   // 30 MB in 12 s
  EXPECT_DOUBLE_EQ(s.later_read_mb_per_s, 3000);  // 60 MB in 20 ms
  EXPECT_THAT(rep.ToText(), HasSubstr("cold first epoch: epoch 1 trained at 1.0 k samples/s, the "
                                      "2 later ones at 3.0 k samples/s (3.0x)"));
  EXPECT_THAT(rep.ToText(), HasSubstr("epoch 1 read from disk"));
  EXPECT_EQ(rep.ToJson()["epoch_split"]["cold"], true);
}

// A fast disk: the first epoch's reads were slower per byte but took 2 s more of the 13.3 s
// more the epoch took; the note does not blame the disk.
TEST(DecodeReportTest, SlowerReadsThatExplainLittleAreNotACold) {
  const BottleneckReport rep = AnalyzeRun(ThreeEpochs(1000, 2'000'000'000), nullptr, 16);
  ASSERT_TRUE(rep.epoch_split.has_value());
  EXPECT_TRUE(rep.epoch_split->differ);
  EXPECT_FALSE(rep.epoch_split->cold);
  EXPECT_THAT(rep.ToText(), HasSubstr("its reads were slower (15.0 MB/s against 3000.0 MB/s "
                                      "after, as from disk or a colder cache) but took only "
                                      "1.99 s more, of the 13.33 s more the epoch took: mostly "
                                      "start-up, not the reads"));
  EXPECT_THAT(rep.ToText(), Not(HasSubstr("cold first epoch")));
}

TEST(DecodeReportTest, SlowFirstEpochWithWarmReadsIsStartUpNotDisk) {
  const BottleneckReport rep = AnalyzeRun(ThreeEpochs(1000, 10'000'000), nullptr, 16);
  ASSERT_TRUE(rep.epoch_split.has_value());
  EXPECT_TRUE(rep.epoch_split->differ);
  EXPECT_FALSE(rep.epoch_split->cold);
  EXPECT_THAT(rep.ToText(), HasSubstr("slow first epoch"));
  EXPECT_THAT(rep.ToText(), HasSubstr("start-up, not the disk"));
  EXPECT_THAT(rep.ToText(), Not(HasSubstr("cold first epoch")));
}

// A pool that holds most of an epoch: the later epochs start with batches built during the
// first, so their rates say nothing of their cost and no cause is claimed, disk or start-up.
TEST(DecodeReportTest, APoolHoldingMostOfAnEpochMakesTheEpochsIncomparable) {
  RunRecord run = ThreeEpochs(1000, 12'000'000'000);
  run.pipeline.pool_buffers = 400;  // of 625 batches per epoch
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  ASSERT_TRUE(rep.epoch_split.has_value());
  EXPECT_TRUE(rep.epoch_split->ran_ahead);
  EXPECT_FALSE(rep.epoch_split->cold);
  EXPECT_THAT(rep.ToText(), HasSubstr("epochs do not compare: epoch 1 trained at"));
  EXPECT_THAT(rep.ToText(), HasSubstr("keeps up to 400 batches ready (an epoch has 625)"));
  EXPECT_THAT(rep.ToText(), Not(HasSubstr("first epoch:")));
}

TEST(DecodeReportTest, EvenEpochsGetNoNoteAndOneEpochNoSplit) {
  BottleneckReport rep = AnalyzeRun(ThreeEpochs(2900, 2'000'000'000), nullptr, 16);
  ASSERT_TRUE(rep.epoch_split.has_value());
  EXPECT_FALSE(rep.epoch_split->differ);
  EXPECT_FALSE(rep.epoch_split->cold);  // slow reads alone do not make the epoch cold
  EXPECT_THAT(rep.ToText(), Not(HasSubstr("first epoch")));
  RunRecord one = ThreeEpochs(1000, 2'000'000'000);
  one.epochs.resize(1);
  rep = AnalyzeRun(one, nullptr, 16);
  EXPECT_FALSE(rep.epoch_split.has_value());
  EXPECT_TRUE(rep.ToJson()["epoch_split"].is_null());
}

}  // namespace
}  // namespace sluice
