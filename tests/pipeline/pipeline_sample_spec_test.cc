// Batches declare their sample spec and are [B, C, H, W]: a dataset stored channels last
// (HWC) comes out channels first, normalized per channel, for every h2d format.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/mem_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/convert.h"
#include "pipeline/pipeline.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kChannels = 3, kHeight = 6, kWidth = 5, kRecords = 40;

// Records of 6x5 pixels of 3 channels (HWC) whose bytes differ per record, channel and pixel.
RecordArrays ColourRecords() {
  RecordArrays r;
  r.spec.height = kHeight;
  r.spec.width = kWidth;
  r.spec.channels = kChannels;
  r.count = kRecords;
  r.samples.resize(r.count * r.spec.sample_bytes());
  for (size_t i = 0; i < r.samples.size(); ++i) r.samples[i] = static_cast<char>(i * 131 + 7);
  for (uint32_t i = 0; i < kRecords; ++i) r.labels.push_back(static_cast<char>(i % 10));
  return r;
}

struct ColourDataset {
  std::unique_ptr<Env> env = NewMemEnv();
  RecordArrays records = ColourRecords();
  std::unique_ptr<Dataset> dataset;

  ColourDataset() {
    WriteDatasetOptions o;
    o.sharding.records_per_shard = 16;
    o.sharding.records_per_frame = 8;
    o.threads = 1;
    EXPECT_TRUE(WriteDataset(env.get(), "/data", "train", records, o).ok());
    auto d = Dataset::Open(env.get(), "/data");
    EXPECT_TRUE(d.ok()) << d.status();
    dataset = std::move(*d);
  }
};

PipelineOptions Options(H2DFormat format, const Normalization& norm) {
  PipelineOptions o;
  o.order.batch_size = 7;
  o.order.seed = 3;
  o.order.shuffle_window_frames = 2;
  o.resources.threads = 2;
  o.resources.pool_size = 3;
  o.format.h2d_format = format;
  o.format.normalization = norm;
  return o;
}

const Normalization kCifarNorm{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};

class ColourBatches : public ::testing::TestWithParam<H2DFormat> {};

// Every value of every batch: batch value (b, c, y, x) is stored byte (y, x, c) of record
// record_ids[b], normalized with channel c's mean and std exactly as the scalar reference
// (f16: that value rounded to nearest even); u8 batches hold the raw bytes, transposed, and
// carry the normalization the device still has to apply.
TEST_P(ColourBatches, HwcRecordsArriveAsChwNormalizedPerChannel) {
  const H2DFormat format = GetParam();
  ColourDataset data;
  auto p = Pipeline::Create(data.dataset.get(), Options(format, kCifarNorm));
  ASSERT_TRUE(p.ok()) << p.status();
  if ((*p)->uploads_to_device()) GTEST_SKIP() << "device batches are checked by the device tests";
  const size_t plane = size_t{kHeight} * kWidth, values = plane * kChannels;
  uint32_t seen = 0;
  BatchLease lease;
  while (true) {
    absl::StatusOr<bool> next = (*p)->Next(&lease);
    ASSERT_TRUE(next.ok()) << next.status();
    if (!*next) break;
    const BatchView& v = lease.view();
    EXPECT_EQ(v.sample, (SampleSpec{format, kChannels, kHeight, kWidth, SampleLayout::kCHW}));
    if (format == H2DFormat::kU8) {
      ASSERT_NE(v.normalization, nullptr);
      EXPECT_EQ(*v.normalization, kCifarNorm);
    } else {
      EXPECT_EQ(v.normalization, nullptr);
    }
    for (uint32_t b = 0; b < v.size; ++b) {
      const auto* stored = reinterpret_cast<const uint8_t*>(data.records.samples.data()) +
                           size_t{v.record_ids[b]} * values;
      for (size_t c = 0; c < kChannels; ++c) {
        for (size_t px = 0; px < plane; ++px) {
          const uint8_t x = stored[px * kChannels + c];
          const size_t o = b * values + c * plane + px;
          const float ref = NormalizeU8(x, kCifarNorm, c);
          if (format == H2DFormat::kU8) {
            ASSERT_EQ(static_cast<const uint8_t*>(v.samples)[o], x) << b << " " << c << " " << px;
          } else if (format == H2DFormat::kF32) {
            const float got = static_cast<const float*>(v.samples)[o];
            ASSERT_EQ(std::memcmp(&got, &ref, 4), 0) << b << " " << c << " " << px;
          } else {
            ASSERT_EQ(static_cast<const uint16_t*>(v.samples)[o], FloatToHalf(ref))
                << b << " " << c << " " << px;
          }
        }
      }
      EXPECT_EQ(v.labels[b], static_cast<int32_t>(v.record_ids[b] % 10));
    }
    seen += v.size;
    lease.Release();
  }
  EXPECT_EQ(seen, kRecords);
}

INSTANTIATE_TEST_SUITE_P(Formats, ColourBatches,
                         ::testing::Values(H2DFormat::kU8, H2DFormat::kF16, H2DFormat::kF32),
                         [](const ::testing::TestParamInfo<H2DFormat>& format) {
                           return std::string(H2DFormatName(format.param));
                         });

TEST(ColourBatches, AMeanOfTheWrongLengthIsRefusedAtCreateNamingTheChannels) {
  ColourDataset data;
  const Normalization two{{0.5f, 0.5f}, {0.25f}};
  for (H2DFormat format : {H2DFormat::kU8, H2DFormat::kF32}) {
    auto p = Pipeline::Create(data.dataset.get(), Options(format, two));
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("mean has 2 values; the samples have 3 channels"));
  }
}

TEST(ColourBatches, OneMeanAndStdApplyToEveryChannel) {
  ColourDataset data;
  auto p = Pipeline::Create(data.dataset.get(), Options(H2DFormat::kF32, {{0.5f}, {0.25f}}));
  ASSERT_TRUE(p.ok()) << p.status();
  if ((*p)->uploads_to_device()) GTEST_SKIP() << "device batches are checked by the device tests";
  BatchLease lease;
  ASSERT_TRUE(*(*p)->Next(&lease));
  const BatchView& v = lease.view();
  const auto* stored = reinterpret_cast<const uint8_t*>(data.records.samples.data()) +
                       size_t{v.record_ids[0]} * v.sample.values();
  const size_t plane = v.sample.plane_values();
  for (size_t c = 0; c < kChannels; ++c) {
    EXPECT_EQ(static_cast<const float*>(v.samples)[c * plane + 1],
              (static_cast<float>(stored[1 * kChannels + c]) / 255.0f - 0.5f) / 0.25f);
  }
}

}  // namespace
}  // namespace sluice
