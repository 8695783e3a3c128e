// sluice-train on a folder of JPEG/PNG files ingested by sluice-shard create --image-folder:
// DecodeImage + Resize train an MLP to an accuracy; a corrupt image fails the run naming the
// shard file, the record and the reason, or is skipped and counted with --on-corrupt=skip; and
// encoded images without a decoding chain are refused at start saying what to add.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using Output = testing::ToolOutput;
using testing::FinalAccuracy;
using testing::RunShell;

// Writes an ImageFolder tree per split under argv[1]/<split>: classes red, green, blue, each
// image a noisy picture of its own size (10..40 px a side) whose class's channel is bright;
// PNGs and JPEGs mixed. With argv[2], also a damaged PNG ("broken.png": a real PNG with a byte of
// its compressed pixels flipped, which ingestion's structure check lets through and the decoder
// refuses) in the train split's class red.
constexpr char kWriteFolders[] = R"PY(
import io, os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(3)
for split, count in [("train", 60), ("test", 20)]:
    for c, name in enumerate(["red", "green", "blue"]):
        os.makedirs(os.path.join(root, split, name))
        for i in range(count):
            h, w = rng.integers(10, 41, 2)
            a = rng.integers(0, 60, (h, w, 3), dtype=np.uint8)
            a[:, :, c] += 150
            ext = "png" if i % 2 else "jpg"
            Image.fromarray(a).save(os.path.join(root, split, name, "%03d.%s" % (i, ext)))
if len(sys.argv) > 2:
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    data[60] ^= 0xFF  # inside the first IDAT chunk's data (it starts at byte 41)
    open(os.path.join(root, "train", "red", "broken.png"), "wb").write(bytes(data))
)PY";

constexpr char kChain[] = "--transforms='DecodeImage(), Resize((16, 16))'";

class SluiceTrainImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_train_images_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    if (RunShell("/usr/bin/python3 -c 'import PIL, numpy'").exit_code != 0) {
      GTEST_SKIP() << "needs /usr/bin/python3 with PIL and numpy";
    }
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }

  // The folders written and ingested into dir_/data (splits train and `eval_split`: the test
  // folder's images).
  void Ingest(bool with_broken_image, const std::string& eval_split = "test") {
    const std::string script = absl::StrCat(dir_, "/write_folders.py");
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), script, kWriteFolders).ok());
    Output out = RunShell(absl::StrCat("/usr/bin/python3 ", script, " ", dir_, "/images",
                                       with_broken_image ? " broken" : ""));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    for (const char* split : {"train", "test"}) {
      out = RunShell(absl::StrCat(SLUICE_SHARD_BIN, " create --image-folder ", dir_, "/images/",
                                  split, " --out ", dir_, "/data --split ",
                                  std::string(split) == "test" ? eval_split : split,
                                  " --records-per-frame 16"));
      ASSERT_EQ(out.exit_code, 0) << out.text;
    }
  }

  Output Train(const std::string& args) {
    return RunShell(absl::StrCat(SLUICE_TRAIN_BIN, " --data=", dir_,
                                 "/data --device=cpu --quiet --layers=768,32,3 ", args));
  }

  std::string dir_;
};

TEST_F(SluiceTrainImagesTest, TrainsOnAnImageFolderThroughDecodeAndResize) {
  Ingest(/*with_broken_image=*/false);
  const Output out = Train(absl::StrCat("--epochs=4 --batch-size=16 ", kChain));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Chance is 1/3; the class is the bright channel, which survives decode and resize.
  EXPECT_GT(FinalAccuracy(out.text), 0.8) << out.text;
  // The folder's records are stored class by class: unshuffled batches hold one class, said at
  // start; with --shuffle nothing is said.
  EXPECT_NE(out.text.find("was sharded from an image folder, whose records are stored class by "
                          "class, and --shuffle is off: each batch holds one or two classes; add "
                          "--shuffle"),
            std::string::npos)
      << out.text;
  const Output shuffled = Train(absl::StrCat("--epochs=1 --batch-size=16 --shuffle ", kChain));
  ASSERT_EQ(shuffled.exit_code, 0) << shuffled.text;
  EXPECT_EQ(shuffled.text.find("stored class by class"), std::string::npos) << shuffled.text;
}

// An image folder's train/ and val/ sharded under their names: the val split is evaluated (no
// test split beside it), found beside the train split or in a --test-data directory.
TEST_F(SluiceTrainImagesTest, AValSplitIsEvaluatedWhenThereIsNoTestSplit) {
  Ingest(/*with_broken_image=*/false, "val");
  for (const std::string& test_data :
       {std::string(), absl::StrCat(" --test-data=", dir_, "/data")}) {
    const Output out =
        Train(absl::StrCat("--epochs=2 --batch-size=16 --shuffle ", kChain, test_data));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_EQ(out.text.find("nothing was evaluated"), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("(60 samples)"), std::string::npos) << out.text;  // val: 3 x 20
    EXPECT_GT(FinalAccuracy(out.text), 0.6) << out.text;
  }
}

TEST_F(SluiceTrainImagesTest, ACorruptImageFailsTheRunNamingShardRecordAndReason) {
  Ingest(/*with_broken_image=*/true);
  const Output out = Train(absl::StrCat("--epochs=1 --batch-size=16 ", kChain));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("/data/train-00000-"), std::string::npos) << out.text;
  // Classes sort blue, green, red, and broken.png after red's 000..059: record 180, named by
  // its file (the manifest's record_sources).
  EXPECT_NE(out.text.find(".shard: record 180 (red/broken.png): DecodeImage(mode=RGB): "),
            std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("final test accuracy"), std::string::npos) << out.text;
}

TEST_F(SluiceTrainImagesTest, ACorruptImageIsSkippedAndCountedWithOnCorruptSkip) {
  Ingest(/*with_broken_image=*/true);
  // 1 corrupt record of 181 per epoch is 0.55%, under 1%, however far the pipeline builds
  // batches ahead of delivery (the default pool holds both epochs here).
  const Output out = Train(absl::StrCat(
      "--epochs=2 --batch-size=16 --on-corrupt=skip --max-corrupt-fraction=0.01 ", kChain));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("skipped in the train split: 2 corrupt records; first: "),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find(".shard: record 180 (red/broken.png): DecodeImage(mode=RGB): "),
            std::string::npos)
      << out.text;
  EXPECT_GT(FinalAccuracy(out.text), 0.5) << out.text;
}

TEST_F(SluiceTrainImagesTest, EncodedImagesWithoutADecodingChainAreRefusedSayingWhatToAdd) {
  Ingest(/*with_broken_image=*/false);
  // Refused at start, before any step, with the exit code of the other --transforms errors found
  // against the data (1; 2 is for flags that do not parse).
  Output out = Train("--epochs=1");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_EQ(out.text.find("epoch 1"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("the split stores encoded images (image files) and --transforms is "
                          "empty; set --transforms starting with DecodeImage() and fixing the "
                          "size, e.g. 'DecodeImage(), RandomResizedCrop(224), ...'"),
            std::string::npos)
      << out.text;
  out = Train("--epochs=1 --transforms='Resize((16, 16))'");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("but the chain starts with Resize("), std::string::npos) << out.text;
}

// --what-if=transforms (prebuilt chain outputs) and --what-if=preprocess (prebuilt batches)
// build what they replay by decoding the records through the run's chain.
TEST_F(SluiceTrainImagesTest, WhatIfRunsBuildTheirSamplesThroughTheDecodingChain) {
  Ingest(/*with_broken_image=*/false);
  for (const char* what_if : {"transforms", "preprocess"}) {
    const Output out =
        Train(absl::StrCat("--epochs=1 --batch-size=16 --what-if=", what_if, " ", kChain));
    ASSERT_EQ(out.exit_code, 0) << what_if << "\n" << out.text;
    EXPECT_NE(out.text.find(absl::StrCat("what-if: ", what_if, " was free in this run")),
              std::string::npos)
        << out.text;
  }
}

// Each preprocess thread's scratch is sized for the largest image of the split, which the
// manifest records at ingestion (at most 40x40 here): under ulimit -v the run fits. A manifest
// without that record (written before it existed) falls back to the largest image a record may
// declare (4096x4096): the run is then refused up front counting the scratch, not part-way.
TEST_F(SluiceTrainImagesTest, AnAddressSpaceLimitCountsTheTransformsScratch) {
  Ingest(/*with_broken_image=*/false);
  // 3 threads of stack and arenas (~312 MiB) fit in 977 MiB; 2 x 2 x 160 MiB of scratch do not.
  const std::string train = absl::StrCat(
      "ulimit -v 1000000; ", SLUICE_TRAIN_BIN, " --data=", dir_,
      "/data --device=cpu --quiet --layers=768,32,3 --epochs=1 --threads=2 "
      "--decompress-threads=1 --preprocess-threads=2 --compute-threads=1 --evaluate=false ",
      kChain);
  Output out = RunShell(train);
  EXPECT_EQ(out.exit_code, 0) << out.text;
  for (const char* split : {"train", "test"}) {
    const Output strip = RunShell(absl::StrCat(
        "/usr/bin/python3 -c \"import json, sys; p = sys.argv[1]; m = json.load(open(p)); "
        "[m['sample'].pop(k, None) for k in ('max_width', 'max_height', 'max_pixels', "
        "'max_pixels_record')]; "
        "json.dump(m, open(p, 'w'))\" ",
        dir_, "/data/", split, ".manifest.json"));
    ASSERT_EQ(strip.exit_code, 0) << strip.text;
  }
  out = RunShell(train);
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("of transforms scratch for the train and test preprocess threads"),
            std::string::npos)
      << out.text;
}

// The report's per-op split of preprocess names DecodeImage with a share in [0, 100] (the
// shares and the rest add up to 100), and a delay injected into preprocess makes it the limit.
TEST_F(SluiceTrainImagesTest, ReportSplitsPreprocessIntoDecodeAndResizeAndNamesAnInjectedLimit) {
  Ingest(/*with_broken_image=*/false);
  const std::string json = absl::StrCat(dir_, "/report.json");
  bool named = false;
  // The injected 20 ms per batch of 16 caps preprocess at ~800 samples/s against a 768-32-3
  // MLP's tens of thousands: a wide margin, with retries for a loaded machine.
  for (int attempt = 0; attempt < 3 && !named; ++attempt) {
    const Output out =
        Train(absl::StrCat("--epochs=2 --batch-size=16 --preprocess-threads=1 --report-json=", json,
                           " --inject-delay=preprocess:20000 ", kChain));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    std::ifstream in(json);
    const nlohmann::json report = nlohmann::json::parse(in);
    named = report["verdict"]["limiting_stage"] == "preprocess";
    for (const auto& stage : report["stages"]) {
      if (stage["stage"] != "preprocess") continue;
      ASSERT_TRUE(stage["ops"].is_array()) << stage.dump();
      ASSERT_EQ(stage["ops"].size(), 2u) << stage.dump();
      EXPECT_EQ(stage["ops"][0]["op"], "DecodeImage(mode=RGB)") << stage.dump();
      double total = stage["outside_chain_pct"].get<double>();
      for (const auto& op : stage["ops"]) {
        const double share = op["share_pct"].get<double>();
        EXPECT_GE(share, 0.0) << stage.dump();
        EXPECT_LE(share, 100.0) << stage.dump();
        total += share;
      }
      EXPECT_NEAR(total, 100.0, 0.5) << stage.dump();
      // DecodeImage does more work per sample than a 16x16 resize of the decoded image.
      EXPECT_GT(stage["ops"][0]["share_pct"].get<double>(), 0.0) << stage.dump();
    }
  }
  EXPECT_TRUE(named) << "preprocess was never named the limit with 20 ms injected per batch";
}

// Decoding has its own row (a part of preprocess, per image), its own ceiling and its own spans
// in the trace, each nested in its batch's preprocess span; a delay injected into decode makes
// the verdict name decode.
TEST_F(SluiceTrainImagesTest, InjectedDecodeDelayIsNamedWithItsRowCeilingAndTraceSpans) {
  Ingest(/*with_broken_image=*/false);
  const std::string json = absl::StrCat(dir_, "/report.json");
  const std::string trace = absl::StrCat(dir_, "/trace.json");
  bool named = false;
  // 3 ms per image caps decode at ~330 images/s on one thread against the MLP's tens of
  // thousands: a wide margin, with retries for a loaded machine.
  for (int attempt = 0; attempt < 3 && !named; ++attempt) {
    const Output out = Train(absl::StrCat("--epochs=2 --batch-size=16 --preprocess-threads=1 ",
                                          "--report-json=", json, " --trace=", trace,
                                          " --inject-delay=decode:3000 ", kChain));
    ASSERT_EQ(out.exit_code, 0) << out.text;
    EXPECT_NE(out.text.find("decode runs inside preprocess, on its 1 thread:"), std::string::npos)
        << out.text;
    EXPECT_NE(out.text.find("note: injected delays (--inject-delay): decode 3000 us per image;"),
              std::string::npos)
        << out.text;
    std::ifstream in(json);
    const nlohmann::json report = nlohmann::json::parse(in);
    named = report["verdict"]["limiting_stage"] == "decode";
    if (named) {
      EXPECT_NE(report["verdict"]["sentence"].get<std::string>().find("decode is the limit"),
                std::string::npos)
          << report["verdict"].dump();
    }
    nlohmann::json decode, preprocess;
    for (const auto& stage : report["stages"]) {
      if (stage["stage"] == "decode") decode = stage;
      if (stage["stage"] == "preprocess") preprocess = stage;
    }
    ASSERT_TRUE(decode.is_object()) << report["stages"].dump();
    EXPECT_TRUE(decode["present"].get<bool>());
    EXPECT_EQ(decode["items"], 360);  // 180 train images, each decoded once per epoch
    EXPECT_GE(decode["busy_ns"].get<int64_t>(), 360 * int64_t{3'000'000});
    EXPECT_LE(decode["busy_ns"].get<int64_t>(), preprocess["busy_ns"].get<int64_t>());
    EXPECT_LE(decode["busy_pct"].get<double>(), preprocess["busy_pct"].get<double>());
    EXPECT_TRUE(report["ceilings"]["decode"]["measured"].get<bool>()) << report["ceilings"].dump();
    EXPECT_GT(report["ceilings"]["decode"]["samples_per_s"].get<double>(), 0);

    std::ifstream tin(trace);
    const nlohmann::json events = nlohmann::json::parse(tin)["traceEvents"];
    int decode_spans = 0, nested = 0;
    for (const auto& e : events) {
      if (e.value("name", "") != "decode") continue;
      ++decode_spans;
      ASSERT_TRUE(e["args"].contains("record")) << e.dump();
      const double ts = e["ts"], end = ts + e["dur"].get<double>();
      for (const auto& p : events) {
        if (p.value("name", "") == "preprocess" && p["tid"] == e["tid"] && p["ts"] <= ts &&
            p["ts"].get<double>() + p["dur"].get<double>() >= end) {
          ++nested;
          break;
        }
      }
    }
    EXPECT_EQ(decode_spans, 360);
    EXPECT_EQ(nested, decode_spans);
  }
  EXPECT_TRUE(named) << "decode was never named the limit with 3 ms injected per image";
}

// --what-if=decode replaces each decode by a cached decoded image: the run decodes nothing
// (no decode row) and says the accuracy means nothing.
TEST_F(SluiceTrainImagesTest, WhatIfDecodeRunsTheChainOnCachedDecodedImages) {
  Ingest(/*with_broken_image=*/false);
  const std::string json = absl::StrCat(dir_, "/report.json");
  const Output out = Train(absl::StrCat(
      "--epochs=1 --batch-size=16 --what-if=decode --report-json=", json, " ", kChain));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("what-if: decode was free in this run"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("decoded images with its own record's label"), std::string::npos)
      << out.text;
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  for (const auto& stage : report["stages"]) {
    if (stage["stage"] == "decode") {
      EXPECT_FALSE(stage["present"].get<bool>()) << stage.dump();
    }
    if (stage["stage"] == "preprocess") {
      EXPECT_EQ(stage["samples"], 180) << stage.dump();
    }
  }
}

// The decode ceiling decodes as the run does (windows, or whole images with
// SLUICE_WINDOW_DECODE=0), so the two are cached apart: a window run read the whole-decode
// ceiling a run before had cached, with its note, and the reverse (the sixth hostile trial).
TEST_F(SluiceTrainImagesTest, TheDecodeCeilingIsCachedApartForWindowAndWholeDecoding) {
  Ingest(/*with_broken_image=*/false);
  const std::string args = absl::StrCat(
      SLUICE_TRAIN_BIN, " --data=", dir_, "/data --device=cpu --quiet --layers=768,32,3 ",
      "--epochs=1 --batch-size=16 --cache-dir=", dir_, "/cache ",
      "'--transforms=DecodeImage(), CenterCrop(16)' --report-json=");
  const auto decode_note = [](const std::string& json) {
    std::ifstream in(json);
    return nlohmann::json::parse(in)["ceilings"]["decode"]["note"].get<std::string>();
  };
  Output out = RunShell(absl::StrCat("SLUICE_WINDOW_DECODE=0 ", args, dir_, "/whole.json"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(decode_note(dir_ + "/whole.json").find("only the windows"), std::string::npos);
  out = RunShell(absl::StrCat(args, dir_, "/window.json"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(decode_note(dir_ + "/window.json").find("only the windows the crop keeps"),
            std::string::npos);
  out = RunShell(absl::StrCat("SLUICE_WINDOW_DECODE=0 ", args, dir_, "/whole2.json"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(decode_note(dir_ + "/whole2.json").find("only the windows"), std::string::npos);
}

}  // namespace
}  // namespace sluice
