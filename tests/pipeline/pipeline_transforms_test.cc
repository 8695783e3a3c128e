// The transforms in the pipeline (BatchFormat::transforms): each sample's random draws depend
// on (seed, epoch, global position) only, so batches are the same for any thread count, world
// size and start step; a random crop is a padded crop of its record; the batch format's rules
// against the chain's output; errors at start.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/testing/mem_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/batch_format.h"
#include "pipeline/convert.h"
#include "pipeline/pipeline.h"
#include "pipeline/resource_limits.h"
#include "pipeline/transforms/transform_spec.h"
#include "report/stages.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint32_t kChannels = 3, kSide = 8, kRecords = 48;
constexpr char kRandomChain[] = "RandomCrop(6, padding=2), RandomHorizontalFlip()";

struct ColourDataset {
  std::unique_ptr<Env> env = NewMemEnv();
  RecordArrays records;
  std::unique_ptr<Dataset> dataset;

  ColourDataset() {
    records.spec.height = kSide;
    records.spec.width = kSide;
    records.spec.channels = kChannels;
    records.count = kRecords;
    records.samples.resize(records.count * records.spec.sample_bytes());
    for (size_t i = 0; i < records.samples.size(); ++i) {
      records.samples[i] = static_cast<char>(1 + (i * 131 + i / 7) % 251);  // never 0 (padding)
    }
    for (uint32_t i = 0; i < kRecords; ++i) records.labels.push_back(static_cast<char>(i % 10));
    WriteDatasetOptions o;
    o.sharding.records_per_shard = 16;
    o.sharding.records_per_frame = 8;
    o.threads = 1;
    EXPECT_TRUE(WriteDataset(env.get(), "/data", "train", records, o).ok());
    auto d = Dataset::Open(env.get(), "/data");
    EXPECT_TRUE(d.ok()) << d.status();
    dataset = std::move(*d);
  }
  // Record `id`'s value at channel c, row y, column x (stored HWC).
  uint8_t At(uint32_t id, uint32_t c, int y, int x) const {
    const size_t k = size_t{id} * records.spec.sample_bytes() +
                     (static_cast<size_t>(y) * kSide + static_cast<size_t>(x)) * kChannels;
    return static_cast<uint8_t>(records.samples[k + c]);
  }
};

// `text` parsed as sluice-train's --transforms is (the tests' chains parse).
TransformSpec Chain(const std::string& text) {
  absl::StatusOr<TransformSpec> spec = TransformSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status();
  return spec.ok() ? *spec : TransformSpec();
}

PipelineOptions Options(const std::string& transforms, H2DFormat format = H2DFormat::kU8) {
  PipelineOptions o;
  o.order.batch_size = 7;
  o.order.seed = 11;
  o.order.shuffle_window_frames = 2;
  o.resources.threads = 1;
  o.resources.pool_size = 3;
  o.format.h2d_format = format;
  o.format.transforms = Chain(transforms);
  o.span.epochs = 2;
  return o;
}

// Each delivered sample's bytes, by (epoch, step, record id).
using Samples = std::map<std::vector<uint64_t>, std::string>;

absl::StatusOr<Samples> RunSamples(const Dataset* dataset, const PipelineOptions& options,
                                   SampleSpec* spec = nullptr) {
  auto p = Pipeline::Create(dataset, options);
  if (!p.ok()) return p.status();
  if ((*p)->uploads_to_device()) return absl::UnimplementedError("device batches");
  Samples out;
  BatchLease lease;
  while (true) {
    absl::StatusOr<bool> got = (*p)->Next(&lease);
    if (!got.ok()) return got.status();
    if (!*got) break;
    const BatchView& v = lease.view();
    if (spec != nullptr) *spec = v.sample;
    const size_t bytes = v.sample.bytes();
    for (uint32_t i = 0; i < v.size; ++i) {
      out[{v.epoch, v.step, v.record_ids[i]}] =
          std::string(static_cast<const char*>(v.samples) + i * bytes, bytes);
    }
  }
  return out;
}

TEST(PipelineTransforms, SameSamplesForOneAndTwoThreads) {
  ColourDataset data;
  PipelineOptions one = Options(kRandomChain);
  PipelineOptions two = one;
  two.resources.threads = 2;
  two.resources.preprocess_threads = 2;
  auto a = RunSamples(data.dataset.get(), one);
  auto b = RunSamples(data.dataset.get(), two);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), 2 * kRecords);
  EXPECT_EQ(*a, *b);
}

// Rank 0's and rank 1's slices together are the one-rank batch: the same records, each
// transformed as in the one-rank run (its draws follow its global position, not its place in
// the rank's slice).
TEST(PipelineTransforms, TwoRanksTogetherEqualOneRank) {
  ColourDataset data;
  auto whole = RunSamples(data.dataset.get(), Options(kRandomChain));
  ASSERT_TRUE(whole.ok()) << whole.status();
  Samples joined;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    PipelineOptions o = Options(kRandomChain);
    o.slice = DataParallelSlice{rank, 2};
    auto part = RunSamples(data.dataset.get(), o);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_LT(part->size(), whole->size());
    joined.insert(part->begin(), part->end());
  }
  EXPECT_EQ(joined, *whole);
}

TEST(PipelineTransforms, MidEpochResumeReplaysTheSameSamples) {
  ColourDataset data;
  auto whole = RunSamples(data.dataset.get(), Options(kRandomChain));
  ASSERT_TRUE(whole.ok()) << whole.status();
  PipelineOptions o = Options(kRandomChain);
  o.span.start_step = 3;
  auto resumed = RunSamples(data.dataset.get(), o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  Samples expected;
  for (const auto& [key, bytes] : *whole) {
    if (key[0] > 0 || key[1] >= 3) expected[key] = bytes;
  }
  EXPECT_EQ(*resumed, expected);
}

// The augmentation ops (issue 38) draw from the same per-sample streams: the same samples for
// one and two threads and after a mid-epoch resume, and some of the random ones did change them.
TEST(PipelineTransforms, AugmentationsGiveTheSameSamplesForAnyThreadsAndAfterAResume) {
  ColourDataset data;
  const std::string chain =
      "Pad(1, padding_mode='edge'), RandomCrop(8, padding=1), RandomVerticalFlip(), "
      "RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), RandomGrayscale(p=0.5), "
      "RandomChoice([RandomHorizontalFlip(), GaussianBlur(3)]), RandomRotation(20), "
      "RandomAffine(10, translate=(0.1, 0.1), shear=5, interpolation=bilinear), "
      "RandomChoice([RandomInvert(), RandomPosterize(4), RandomSolarize(128), "
      "RandomAutocontrast(pil=True), RandomEqualize(), RandomAdjustSharpness(2)]), "
      "Normalize(0.5, 0.25), "
      "RandomErasing(value=random)";
  auto one = RunSamples(data.dataset.get(), Options(chain, H2DFormat::kF32));
  ASSERT_TRUE(one.ok()) << one.status();
  PipelineOptions two = Options(chain, H2DFormat::kF32);
  two.resources.threads = 2;
  two.resources.preprocess_threads = 2;
  auto b = RunSamples(data.dataset.get(), two);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*one, *b);
  PipelineOptions resumed = Options(chain, H2DFormat::kF32);
  resumed.span.start_step = 3;
  auto r = RunSamples(data.dataset.get(), resumed);
  ASSERT_TRUE(r.ok()) << r.status();
  Samples expected;
  for (const auto& [key, bytes] : *one) {
    if (key[0] > 0 || key[1] >= 3) expected[key] = bytes;
  }
  EXPECT_EQ(*r, expected);
  // Grey samples (three equal planes) appear, and not for every sample.
  int grey = 0;
  for (const auto& [key, bytes] : *one) {
    const size_t plane = bytes.size() / 3;
    grey += bytes.compare(0, plane, bytes, plane, plane) == 0 &&
            bytes.compare(0, plane, bytes, 2 * plane, plane) == 0;
  }
  EXPECT_GT(grey, 0);
  EXPECT_LT(grey, static_cast<int>(one->size()));
}

// Every output is the crop at some offset (dy, dx) in [0, 6]^2 of the record zero-padded by 2,
// and the offsets differ between samples (the draws are per sample).
TEST(PipelineTransforms, EveryRandomCropIsAPaddedCropOfItsRecord) {
  ColourDataset data;
  SampleSpec spec;
  auto out = RunSamples(data.dataset.get(), Options("RandomCrop(6, padding=2)"), &spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(spec, (SampleSpec{ElementType::kU8, kChannels, 6, 6, SampleLayout::kCHW}));
  std::map<int, int> offsets;
  for (const auto& [key, bytes] : *out) {
    const uint32_t id = static_cast<uint32_t>(key[2]);
    int found = -1;
    for (int dy = 0; dy <= 6 && found < 0; ++dy) {
      for (int dx = 0; dx <= 6 && found < 0; ++dx) {
        bool same = true;
        for (uint32_t c = 0; c < kChannels && same; ++c) {
          for (int y = 0; y < 6 && same; ++y) {
            for (int x = 0; x < 6 && same; ++x) {
              const int sy = y + dy - 2, sx = x + dx - 2;
              const bool inside = sy >= 0 && sy < int{kSide} && sx >= 0 && sx < int{kSide};
              const uint8_t want = inside ? data.At(id, c, sy, sx) : 0;
              same = static_cast<uint8_t>(bytes[(c * 6 + y) * 6 + x]) == want;
            }
          }
        }
        if (same) found = dy * 7 + dx;
      }
    }
    ASSERT_GE(found, 0) << "record " << id << " in step " << key[1] << " is no padded crop";
    ++offsets[found];
  }
  EXPECT_GT(offsets.size(), 8u);
}

// A u8 chain output goes to an f32 batch normalized per channel exactly as the converter does.
TEST(PipelineTransforms, U8ChainOutputIsNormalizedPerChannelIntoF32) {
  ColourDataset data;
  const Normalization norm{{0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}};
  PipelineOptions o8 = Options(kRandomChain);
  o8.format.normalization = norm;
  PipelineOptions o32 = o8;
  o32.format.h2d_format = H2DFormat::kF32;
  auto u8 = RunSamples(data.dataset.get(), o8);
  auto f32 = RunSamples(data.dataset.get(), o32);
  ASSERT_TRUE(u8.ok()) << u8.status();
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_EQ(u8->size(), f32->size());
  for (const auto& [key, bytes] : *u8) {
    const std::string& f = f32->at(key);
    ASSERT_EQ(f.size(), 4 * bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      float got;
      std::memcpy(&got, f.data() + 4 * i, 4);
      ASSERT_EQ(got, NormalizeU8(static_cast<uint8_t>(bytes[i]), norm, i / 36)) << i;
    }
  }
}

TEST(PipelineTransforms, F32ChainOutputSetsTheBatchFormat) {
  ColourDataset data;
  const std::string chain =
      "RandomCrop(6, padding=2), Normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])";
  SampleSpec spec;
  ASSERT_TRUE(RunSamples(data.dataset.get(), Options(chain, H2DFormat::kF32), &spec).ok());
  EXPECT_EQ(spec, (SampleSpec{ElementType::kF32, kChannels, 6, 6, SampleLayout::kCHW}));
  PipelineOptions automatic = Options(chain, H2DFormat::kU8);
  automatic.format.h2d_auto = true;
  ASSERT_TRUE(RunSamples(data.dataset.get(), automatic, &spec).ok());
  EXPECT_EQ(spec.dtype, ElementType::kF32);
  ASSERT_TRUE(RunSamples(data.dataset.get(), Options(chain, H2DFormat::kF16), &spec).ok());
  EXPECT_EQ(spec.dtype, ElementType::kF16);
}

TEST(PipelineTransforms, BatchFormatRulesRefuseWhatDoesNotFit) {
  ColourDataset data;
  const std::string to_f32 = "Normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])";
  auto u8 = RunSamples(data.dataset.get(), Options(to_f32, H2DFormat::kU8));
  EXPECT_THAT(std::string(u8.status().message()), StartsWith("transforms outputs f32 3x8x8"));
  EXPECT_THAT(std::string(u8.status().message()), HasSubstr("dtype u8 cannot hold them"));
  PipelineOptions twice = Options(to_f32, H2DFormat::kF32);
  twice.format.normalization = Normalization{{0.1f}, {0.5f}};
  EXPECT_THAT(std::string(RunSamples(data.dataset.get(), twice).status().message()),
              HasSubstr("normalize is set: the float samples would be normalized twice"));
  auto bf16 = RunSamples(data.dataset.get(), Options("ToDtype(bfloat16)", H2DFormat::kF32));
  EXPECT_THAT(std::string(bf16.status().message()),
              HasSubstr("dtype f32 does not match them: pass dtype=torch.bfloat16"));
  PipelineOptions bf16_auto = Options("ToDtype(bfloat16)", H2DFormat::kBF16);
  bf16_auto.format.h2d_auto = true;  // --h2d-format auto never picks bf16: the engine reads none
  EXPECT_FALSE(RunSamples(data.dataset.get(), bf16_auto).ok());
  EXPECT_TRUE(RunSamples(data.dataset.get(), Options("ToDtype(bfloat16)", H2DFormat::kBF16)).ok());
  auto f16 = RunSamples(data.dataset.get(), Options("ToDtype(float16)", H2DFormat::kF32));
  EXPECT_THAT(std::string(f16.status().message()), HasSubstr("dtype f32 does not match them"));
  // The flags' spelling, as sluice-train checks it before the run.
  BatchFormat flags;
  flags.h2d_format = H2DFormat::kU8;
  flags.transforms = Chain(to_f32);
  EXPECT_THAT(
      std::string(
          ResolveBatchFormat(data.dataset->spec(), flags, SettingNames::kFlags).status().message()),
      StartsWith("--transforms outputs f32 3x8x8 CHW samples; --h2d-format u8"));
}

// sluice.Loader's memory_format=torch.channels_last and dtype=torch.bfloat16: every sample holds
// the values of the CHW float32 (or u8) batch, in its pixel (HWC) and rounded as
// tensor.to(torch.bfloat16) rounds; without a chain, with a chain that outputs u8 (converted
// with a per-channel normalization) and with one that outputs f32 (Normalize in the chain).
TEST(PipelineTransforms, ChannelsLastAndBf16BatchesHoldTheChwBatchesValues) {
  ColourDataset data;
  const Normalization per_channel{{0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}};
  const std::string to_f32 =
      "RandomCrop(6, padding=2), Normalize(mean=[0.5, 0.4, 0.3], "
      "std=[0.2, 0.25, 0.3])";
  for (const std::string& chain : {std::string(), std::string(kRandomChain), to_f32}) {
    const bool chain_normalizes = chain == to_f32;
    for (ElementType format : {ElementType::kU8, ElementType::kF32, ElementType::kBF16}) {
      if (chain_normalizes && format == ElementType::kU8) continue;  // refused: f32 samples
      for (SampleLayout layout : {SampleLayout::kCHW, SampleLayout::kHWC}) {
        SCOPED_TRACE(::testing::Message() << "'" << chain << "' " << ElementTypeName(format) << " "
                                          << SampleLayoutName(layout));
        PipelineOptions ref = Options(chain, format == ElementType::kU8 ? format : H2DFormat::kF32);
        if (!chain_normalizes && format != ElementType::kU8) ref.format.normalization = per_channel;
        PipelineOptions got = ref;
        got.format.h2d_format = format;
        got.format.layout = layout;
        SampleSpec ref_spec, got_spec;
        auto want = RunSamples(data.dataset.get(), ref, &ref_spec);
        auto have = RunSamples(data.dataset.get(), got, &got_spec);
        ASSERT_TRUE(want.ok()) << want.status();
        ASSERT_TRUE(have.ok()) << have.status();
        EXPECT_EQ(got_spec.layout, layout);
        EXPECT_EQ(got_spec.dtype, format);
        ASSERT_EQ(want->size(), have->size());
        const size_t channels = ref_spec.channels, plane = ref_spec.plane_values();
        const size_t in_size = ElementSize(ref_spec.dtype), out_size = ElementSize(format);
        for (const auto& [key, sample] : *want) {
          const std::string& other = have->at(key);
          ASSERT_EQ(other.size(), channels * plane * out_size);
          for (size_t c = 0; c < channels; ++c) {
            for (size_t p = 0; p < plane; ++p) {
              const char* a = sample.data() + (c * plane + p) * in_size;
              const size_t at = layout == SampleLayout::kHWC ? p * channels + c : c * plane + p;
              const char* b = other.data() + at * out_size;
              if (format == ElementType::kBF16) {
                float f;
                std::memcpy(&f, a, 4);
                uint16_t h;
                std::memcpy(&h, b, 2);
                ASSERT_EQ(h, FloatToBFloat16(f)) << c << " " << p;
              } else {
                ASSERT_EQ(std::memcmp(a, b, out_size), 0) << c << " " << p;
              }
            }
          }
        }
      }
    }
  }
}

TEST(PipelineTransforms, BadChainsFailAtStartNamingTheSetting) {
  ColourDataset data;
  for (const char* bad : {"RandomCrop(13, padding=2)", "Normalize(mean=[0.5, 0.5], std=[1, 1])"}) {
    auto r = RunSamples(data.dataset.get(), Options(bad, H2DFormat::kF32));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), StartsWith("transforms: ")) << bad;
  }
  auto big = RunSamples(data.dataset.get(), Options("RandomCrop(13, padding=2)"));
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("RandomCrop"));
  // A per-channel normalization of a u8 chain output is checked against its channels.
  PipelineOptions norm = Options(kRandomChain, H2DFormat::kF32);
  norm.format.normalization = Normalization{{0.1f, 0.2f}, {1.0f}};
  EXPECT_THAT(std::string(RunSamples(data.dataset.get(), norm).status().message()),
              StartsWith("normalize (the "));
}

// The buffers are sized from the chain's output: a crop to 2x2 needs fewer bytes than 8x8.
TEST(PipelineTransforms, BufferBytesFollowTheChainOutput) {
  ColourDataset data;
  PipelineOptions plain = Options("", H2DFormat::kF32);
  PipelineOptions cropped = Options("CenterCrop(2)", H2DFormat::kF32);
  auto a = PipelineBufferBytes(plain, data.dataset->spec());
  auto b = PipelineBufferBytes(cropped, data.dataset->spec());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a / 3, 7 * (kChannels * kSide * kSide * 4 + 8));
  EXPECT_EQ(*b / 3, 7 * (kChannels * 2 * 2 * 4 + 8));
}

// Runs the pipeline to its end; its stats then, and the samples it delivered.
absl::StatusOr<PipelineStats> DrainedStats(const Dataset* dataset, const PipelineOptions& options,
                                           uint64_t* samples) {
  auto p = Pipeline::Create(dataset, options);
  if (!p.ok()) return p.status();
  *samples = 0;
  BatchLease lease;
  while (true) {
    absl::StatusOr<bool> got = (*p)->Next(&lease);
    if (!got.ok()) return got.status();
    if (!*got) break;
    *samples += lease.view().size;
  }
  return (*p)->Stats();
}

// The stats name the chain's ops in order and count the samples their time covers: every
// sample whose global position is a multiple of the timing stride, once per epoch.
TEST(PipelineTransforms, StatsCarryEachOpsSampledTime) {
  ColourDataset data;
  uint64_t samples = 0;
  auto st = DrainedStats(data.dataset.get(), Options(kRandomChain), &samples);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->chain_ops.size(), 2u);
  EXPECT_THAT(st->chain_ops[0].op, StartsWith("RandomCrop(size=(6, 6), padding=(2, 2, 2, 2)"));
  EXPECT_THAT(st->chain_ops[1].op, StartsWith("RandomHorizontalFlip("));
  const uint64_t timed_per_epoch =
      (kRecords + TransformChain::kTimingStride - 1) / TransformChain::kTimingStride;
  EXPECT_EQ(samples, 2 * kRecords);
  EXPECT_EQ(st->chain_timed_samples, 2 * timed_per_epoch);
  for (const ChainOpTime& t : st->chain_ops) EXPECT_GT(t.sampled_ns, 0) << t.op;
}

TEST(PipelineTransforms, StatsHaveNoOpsWithoutAChain) {
  ColourDataset data;
  uint64_t samples = 0;
  auto st = DrainedStats(data.dataset.get(), Options(""), &samples);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(samples, 2 * kRecords);
  EXPECT_TRUE(st->chain_ops.empty());
  EXPECT_EQ(st->chain_timed_samples, 0u);
}

// What-if transforms: the same records in the same batches, each sample a copy of one of the
// chain's outputs prebuilt from the first frame (8 records), and no op timed.
TEST(PipelineTransforms, WhatIfTransformsCopiesPrebuiltChainOutputs) {
  ColourDataset data;
  PipelineOptions free = Options(kRandomChain);
  free.diagnostics.what_if = Stage::kTransforms;
  auto normal = RunSamples(data.dataset.get(), Options(kRandomChain));
  auto freed = RunSamples(data.dataset.get(), free);
  ASSERT_TRUE(normal.ok()) << normal.status();
  ASSERT_TRUE(freed.ok()) << freed.status();
  ASSERT_EQ(freed->size(), normal->size());
  std::set<std::string> normal_values, freed_values;
  for (auto a = normal->begin(), b = freed->begin(); a != normal->end(); ++a, ++b) {
    EXPECT_EQ(a->first, b->first);
    EXPECT_EQ(a->second.size(), b->second.size());
    normal_values.insert(a->second);
    freed_values.insert(b->second);
  }
  EXPECT_LE(freed_values.size(), 8u);
  EXPECT_GT(normal_values.size(), 8u);
  uint64_t samples = 0;
  auto st = DrainedStats(data.dataset.get(), free, &samples);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->chain_timed_samples, 0u);
}

TEST(PipelineTransforms, WhatIfTransformsWithoutAChainIsRefused) {
  ColourDataset data;
  PipelineOptions o = Options("");
  o.diagnostics.what_if = Stage::kTransforms;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("the run has no transforms"));
}

// A PNG's signature and IHDR declaring width x height: enough for the writer's header read
// (the pipeline below fails or is checked before any record is decoded).
std::string PngHeader(uint32_t width, uint32_t height) {
  std::string s("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", 16);
  for (uint32_t v : {width, height}) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  }
  s.append("\x08\x02\x00\x00\x00CRC!", 9);
  return s;
}

// An encoded split of `samples` at /enc, each record's source "cls/<i>.png".
struct EncodedDataset {
  std::unique_ptr<Env> env = NewMemEnv();
  std::unique_ptr<Dataset> dataset;

  explicit EncodedDataset(std::vector<std::string> samples) {
    EncodedRecords r;
    for (size_t i = 0; i < samples.size(); ++i)
      r.sources.push_back(absl::StrCat("cls/", i, ".png"));
    r.samples = std::move(samples);
    r.labels = std::string(r.samples.size(), '\0');
    WriteDatasetOptions o;
    o.threads = 1;
    EXPECT_TRUE(WriteEncodedDataset(env.get(), "/enc", "train", r, o).ok());
    auto d = Dataset::Open(env.get(), "/enc");
    EXPECT_TRUE(d.ok()) << d.status();
    if (d.ok()) dataset = std::move(*d);
  }
};

constexpr char kDecodeChain[] = "DecodeImage(), RandomResizedCrop(4)";

// What-if decode and what-if transforms take their samples from the first frame with a record
// that decodes: a first frame of damaged images (on_corrupt=skip) failed the run (exit 1, no
// report) though it trained (the sixth hostile trial).
TEST(PipelineTransforms, WhatIfRunsTakeTheFirstFrameThatDecodesUnderSkip) {
  EncodedRecords r;
  for (int i = 0; i < 4; ++i) r.samples.push_back(PngHeader(8, 8));  // frame 0: no pixel data
  for (int i = 0; i < 8; ++i) {
    r.samples.push_back(testing::EncodePng(8, 8, SPNG_COLOR_TYPE_TRUECOLOR,
                                           std::vector<uint8_t>(8 * 8 * 3, 40 + i)));
  }
  r.labels = std::string(r.samples.size(), '\0');
  std::unique_ptr<Env> env = NewMemEnv();
  WriteDatasetOptions w;
  w.threads = 1;
  w.sharding.records_per_frame = 4;
  ASSERT_TRUE(WriteEncodedDataset(env.get(), "/enc", "train", r, w).ok());
  auto dataset = Dataset::Open(env.get(), "/enc");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  for (Stage stage : {Stage::kDecode, Stage::kTransforms}) {
    SCOPED_TRACE(StageName(stage));
    PipelineOptions o = Options(kDecodeChain);
    o.diagnostics.what_if = stage;
    o.on_corrupt = OnCorrupt::kSkip;
    auto samples = RunSamples(dataset->get(), o);
    ASSERT_TRUE(samples.ok()) << samples.status();
    EXPECT_GT(samples->size(), 0u);
    o.on_corrupt = OnCorrupt::kFail;  // without skip, the damaged record is named
    samples = RunSamples(dataset->get(), o);
    ASSERT_FALSE(samples.ok());
    EXPECT_THAT(samples.status().message(), HasSubstr("record 0"));
  }
}

// One 60000x1 and one 1x60000 image: the scratch used to be sized for the box of 60000x60000
// (36 GB per preprocess thread, which could not be allocated); it is sized for 60000 pixels.
TEST(PipelineTransforms, AWideAndATallImageNeedScratchForTheirAreaNotForTheirBox) {
  EncodedDataset data({PngHeader(60000, 1), PngHeader(1, 60000)});
  ASSERT_NE(data.dataset, nullptr);
  const Manifest& m = data.dataset->manifest();
  ASSERT_EQ(m.image_bound, (ImageSizeBound{60000, 60000, 60000}));
  EXPECT_EQ(EncodedChainInput(m.image_bound).plane_values(), 60000u);
  auto f = ResolveBatchFormat(m.spec, Options(kDecodeChain, H2DFormat::kF32).format,
                              SettingNames::kFlags, m.image_bound);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_LT(f->chain->scratch_bytes(), size_t{2} << 20);
}

// When the scratch cannot be allocated, the error names the image that sets the bound (its
// record and file), so the user knows which file to leave out: --on-corrupt=skip cannot help,
// the scratch is sized before the run.
TEST(PipelineTransforms, ScratchThatCannotBeAllocatedNamesTheImageThatSetsTheBound) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' own mappings do not fit an address-space limit";
#endif
  EncodedDataset data({PngHeader(8, 8), PngHeader(60000, 60000)});
  ASSERT_NE(data.dataset, nullptr);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the limit cannot be undone: a child of its own
    ::close(fds[0]);
    const uint64_t limit = AddressSpaceInUse() + (uint64_t{1} << 30);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(10);
    auto p = Pipeline::Create(data.dataset.get(), Options(kDecodeChain, H2DFormat::kF32));
    const std::string text = p.ok() ? "created"
                                    : absl::StrCat(absl::StatusCodeToString(p.status().code()), " ",
                                                   p.status().message());
    if (::write(fds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ::_exit(11);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_THAT(text, StartsWith("RESOURCE_EXHAUSTED the transforms' scratch of preprocess "
                               "thread 1 ("))
      << text;
  EXPECT_THAT(text, HasSubstr("sized for the chain's largest sample: the split's largest image, "
                              "record 1 (cls/1.png), declares 3600000000 pixels (sample.max_pixels "
                              "of /enc/train.manifest.json; widest 60000, tallest 60000)) could "
                              "not be allocated; leave such images out (sluice-shard create "
                              "--max-image-pixels)"));
}

}  // namespace
}  // namespace sluice
