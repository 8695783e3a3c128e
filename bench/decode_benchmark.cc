// Decode + transforms per image against bare libjpeg-turbo (issue 23's "decode limit"): one
// core, JPEGs of realistic sizes. The images are synthetic photos made here: smooth colour
// fields with hard edges and sensor-like noise (sigma 12), 128 to 512 px per side, JPEG quality
// 90 with 4:2:0 chroma (what cameras and ImageNet use), about the bytes per pixel of real photos.
//
//   build/bench/decode_benchmark --benchmark_min_time=1
//
// BM_BareDecode: tjDecompress2 to interleaved RGB (the decode limit of one core).
// BM_Chain/<chain>: TransformChain::ApplyRecord, what the pipeline runs per encoded record
// (with the chain's fused path where it applies); BM_ChainUnfused/<chain>: the same ops one by
// one (TransformChain::Create(..., false)). The ops after decode cost BM_Chain - BM_BareDecode.
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"

namespace sluice {
namespace {

constexpr int kImages = 64;
constexpr uint32_t kMaxSide = 512;

std::vector<uint8_t> Photo(int h, int w, std::mt19937& rng) {
  std::normal_distribution<float> noise(0.0f, 12.0f);
  std::vector<uint8_t> px(size_t(h) * w * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float shade = ((x / 40 + y / 40) % 2 == 0) ? 0.6f : 1.0f;
      for (int c = 0; c < 3; ++c) {
        const float v = shade * (128 + 100 * std::sin(x / 17.0f + c) * std::cos(y / 23.0f - c));
        px[(size_t(y) * w + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(v + noise(rng), 0.0f, 255.0f));
      }
    }
  }
  return px;
}

const std::vector<std::string>& Jpegs() {
  static const std::vector<std::string> jpegs = [] {
    std::vector<std::string> out;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> side(128, kMaxSide);
    tjhandle tj = tjInitCompress();
    for (int i = 0; i < kImages; ++i) {
      const int h = side(rng), w = side(rng);
      const std::vector<uint8_t> px = Photo(h, w, rng);
      unsigned char* buf = nullptr;
      unsigned long len = 0;
      tjCompress2(tj, px.data(), w, 0, h, TJPF_RGB, &buf, &len, TJSAMP_420, 90, 0);
      out.emplace_back(reinterpret_cast<char*>(buf), len);
      tjFree(buf);
    }
    tjDestroy(tj);
    return out;
  }();
  return jpegs;
}

void BM_BareDecode(benchmark::State& state) {
  const std::vector<std::string>& jpegs = Jpegs();
  std::vector<uint8_t> out(size_t{kMaxSide} * kMaxSide * 3);
  tjhandle tj = tjInitDecompress();
  size_t i = 0;
  for (auto _ : state) {
    const std::string& j = jpegs[i++ % jpegs.size()];
    int w = 0, h = 0, sub = 0, cs = 0;
    const auto* src = reinterpret_cast<const unsigned char*>(j.data());
    tjDecompressHeader3(tj, src, j.size(), &w, &h, &sub, &cs);
    if (tjDecompress2(tj, src, j.size(), out.data(), w, 0, h, TJPF_RGB, 0) != 0) {
      state.SkipWithError(tjGetErrorStr2(tj));
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  tjDestroy(tj);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BareDecode);

void RunChain(benchmark::State& state, const std::string& text, bool fuse) {
  auto chain =
      TransformChain::Create(*ParseTransforms(text), EncodedSampleSpec(kMaxSide, kMaxSide), fuse);
  if (!chain.ok()) {
    state.SkipWithError(std::string(chain.status().message()).c_str());
    return;
  }
  const std::vector<std::string>& jpegs = Jpegs();
  std::vector<float> out((chain->output_spec().bytes() + 3) / 4);
  std::vector<float> scratch((chain->scratch_bytes() + 64) / 4 + 16);
  char* aligned = reinterpret_cast<char*>(scratch.data());
  aligned += (64 - reinterpret_cast<uintptr_t>(aligned) % 64) % 64;
  uint64_t index = 0;
  for (auto _ : state) {
    const std::string& j = jpegs[index % jpegs.size()];
    const absl::Status s =
        chain->ApplyRecord(j.data(), j.size(), out.data(), SampleKey{1, 0, index++}, aligned);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Chain(benchmark::State& state, const std::string& text) { RunChain(state, text, true); }
void BM_ChainUnfused(benchmark::State& state, const std::string& text) {
  RunChain(state, text, false);
}
BENCHMARK_CAPTURE(BM_ChainUnfused, decode_rrc224_flip_normalize,
                  std::string("DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip(), "
                              "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])"));
BENCHMARK_CAPTURE(BM_Chain, decode_rrc224_flip_normalize,
                  std::string("DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip(), "
                              "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])"));
BENCHMARK_CAPTURE(BM_Chain, decode_rrc224_flip,
                  std::string("DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip()"));
BENCHMARK_CAPTURE(BM_Chain, decode_centercrop224, std::string("DecodeImage(), CenterCrop(224)"));
BENCHMARK_CAPTURE(BM_Chain, decode_resize256_centercrop224,
                  std::string("DecodeImage(), Resize(256), CenterCrop(224)"));

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
