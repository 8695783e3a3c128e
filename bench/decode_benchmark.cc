// Decode + transforms per image against bare libjpeg-turbo (issue 23's "decode limit"): one
// core, JPEGs of realistic sizes. The images are synthetic photos made here: smooth colour
// fields with hard edges and sensor-like noise (sigma 12), 128 to 512 px per side, JPEG quality
// 90 with 4:2:0 chroma (what cameras and ImageNet use), about the bytes per pixel of real photos.
//
//   build/bench/decode_benchmark --benchmark_min_time=1
//   SLUICE_DECODE_BENCH_DIR=DIR build/bench/decode_benchmark ...   (your own JPEGs instead)
//
// With SLUICE_DECODE_BENCH_DIR set, the images are the first 256 JPEG files (.jpg, .jpeg) under
// DIR, in path order, of at most 512 px per side (larger ones are left out, and said so).
//
// BM_BareDecode: tjDecompress2 to interleaved RGB (the decode limit of one core).
// BM_EntropyOnly: libjpeg's jpeg_read_coefficients, the Huffman decoding of every coefficient
// and nothing after it: the floor of any decoder of these files that reads them to the end,
// a reduced-size (draft) one included. BM_EntropyOnly / BM_BareDecode bounds what a draft can
// gain over a full decode (issue 36: a window decode and its draft entropy-decode the same
// rows, down to the window's last).
// BM_Chain/<chain>: TransformChain::ApplyRecord, what the pipeline runs per encoded record
// (with the chain's fused path where it applies); BM_ChainUnfused/<chain>: the same ops one by
// one (TransformChain::Create(..., false)). The ops after decode cost BM_Chain - BM_BareDecode.
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"

extern "C" {
#include <jpeglib.h>
}

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

// The JPEGs under `dir` (see the top), or the process exits saying why: a benchmark of no
// images would print rates of nothing.
std::vector<std::string> JpegsUnder(const std::string& dir) {
  constexpr size_t kMaxFiles = 256;
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (it->is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(it->path());
  }
  if (error) {
    std::cerr << "SLUICE_DECODE_BENCH_DIR=" << dir << ": " << error.message() << "\n";
    std::exit(2);
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  size_t too_large = 0;
  tjhandle tj = tjInitDecompress();
  for (const auto& path : paths) {
    if (out.size() == kMaxFiles) break;
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    int w = 0, h = 0, sub = 0, cs = 0;
    if (tjDecompressHeader3(tj, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                            &w, &h, &sub, &cs) != 0) {
      std::cerr << path << ": not a JPEG this benchmark reads: " << tjGetErrorStr2(tj) << "\n";
      std::exit(2);
    }
    if (w > static_cast<int>(kMaxSide) || h > static_cast<int>(kMaxSide)) {
      ++too_large;
      continue;
    }
    out.push_back(std::move(bytes));
  }
  tjDestroy(tj);
  if (too_large > 0) {
    std::cerr << too_large << " JPEGs under " << dir << " are over " << kMaxSide
              << " px per side: left out\n";
  }
  if (out.empty()) {
    std::cerr << "SLUICE_DECODE_BENCH_DIR=" << dir << ": no JPEG of at most " << kMaxSide
              << " px per side\n";
    std::exit(2);
  }
  std::cerr << "decode_benchmark: " << out.size() << " JPEGs from " << dir << "\n";
  return out;
}

const std::vector<std::string>& Jpegs() {
  static const std::vector<std::string> jpegs = [] {
    if (const char* dir = std::getenv("SLUICE_DECODE_BENCH_DIR"); dir != nullptr && *dir) {
      return JpegsUnder(dir);
    }
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

struct JumpingErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

void BM_EntropyOnly(benchmark::State& state) {
  const std::vector<std::string>& jpegs = Jpegs();
  jpeg_decompress_struct cinfo{};
  JumpingErrors errors{};
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = [](j_common_ptr c) {
    std::longjmp(reinterpret_cast<JumpingErrors*>(c->err)->jump, 1);
  };
  jpeg_create_decompress(&cinfo);
  size_t i = 0;
  for (auto _ : state) {
    const std::string& j = jpegs[i++ % jpegs.size()];
    if (setjmp(errors.jump) != 0) {
      char message[JMSG_LENGTH_MAX];
      errors.mgr.format_message(reinterpret_cast<j_common_ptr>(&cinfo), message);
      state.SkipWithError(message);
      break;
    }
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(j.data()), j.size());
    jpeg_read_header(&cinfo, TRUE);
    benchmark::DoNotOptimize(jpeg_read_coefficients(&cinfo));
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EntropyOnly);

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
BENCHMARK_CAPTURE(BM_Chain, decode_rrc112_flip,
                  std::string("DecodeImage(), RandomResizedCrop(112), RandomHorizontalFlip()"));
BENCHMARK_CAPTURE(BM_Chain, draft_rrc112_flip,
                  std::string("DecodeImage(draft=True), RandomResizedCrop(112), "
                              "RandomHorizontalFlip()"));
BENCHMARK_CAPTURE(BM_Chain, decode_resize256_centercrop224,
                  std::string("DecodeImage(), Resize(256), CenterCrop(224)"));

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
