// The CUDA upload stage: cudaMemcpyAsync on a dedicated copy stream into a ring of device
// batch slots (pipeline/internal/device_uploader.h). Host code only, linked against cudart.
#include <cuda_runtime.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/internal/device_uploader.h"

// Evaluates a CUDA runtime call; on failure returns kInternal (kResourceExhausted for
// out-of-memory) naming the call, file and line.
#define SLUICE_PIPELINE_CUDA_CHECK(call)                                                     \
  do {                                                                                       \
    const cudaError_t sluice_err_ = (call);                                                  \
    if (sluice_err_ != cudaSuccess) {                                                        \
      const std::string sluice_msg_ = absl::StrCat(#call, " failed at ", __FILE__, ":",      \
                                                   __LINE__, ": ",                           \
                                                   cudaGetErrorString(sluice_err_));         \
      return sluice_err_ == cudaErrorMemoryAllocation                                        \
                 ? absl::ResourceExhaustedError(sluice_msg_)                                 \
                 : absl::InternalError(sluice_msg_);                                         \
    }                                                                                        \
  } while (0)

namespace sluice::pipeline_internal {

bool CudaDeviceAvailable() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

namespace {

struct Slot {
  void* samples = nullptr;
  int32_t* labels = nullptr;
  cudaEvent_t copy_start = nullptr;  // timing events bracket the copies
  cudaEvent_t ready = nullptr;       // copy finished: the consumer's stream waits on it
  cudaEvent_t released = nullptr;    // consumer's reads finished: the next copy waits on it
  bool release_pending = false;
};

class CudaUploader : public DeviceUploader {
 public:
  ~CudaUploader() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (Slot& s : slots_) {
      cudaFree(s.samples);
      cudaFree(s.labels);
      if (s.copy_start) cudaEventDestroy(s.copy_start);
      if (s.ready) cudaEventDestroy(s.ready);
      if (s.released) cudaEventDestroy(s.released);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(int device, uint32_t depth, size_t sample_bytes, size_t label_bytes) {
    device_ = device;
    SLUICE_PIPELINE_CUDA_CHECK(cudaSetDevice(device));
    SLUICE_PIPELINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    slots_.resize(depth);
    for (Slot& s : slots_) {
      SLUICE_PIPELINE_CUDA_CHECK(cudaMalloc(&s.samples, sample_bytes));
      SLUICE_PIPELINE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.labels), label_bytes));
      SLUICE_PIPELINE_CUDA_CHECK(cudaEventCreate(&s.copy_start));
      SLUICE_PIPELINE_CUDA_CHECK(cudaEventCreate(&s.ready));
      SLUICE_PIPELINE_CUDA_CHECK(cudaEventCreateWithFlags(&s.released, cudaEventDisableTiming));
    }
    return absl::OkStatus();
  }

  absl::Status Enqueue(uint32_t slot, const void* samples, size_t sample_bytes,
                       const int32_t* labels, size_t label_bytes, bool skip_copy,
                       std::function<void()> done) override {
    Slot& s = slots_[slot];
    SLUICE_PIPELINE_CUDA_CHECK(cudaSetDevice(device_));
    if (s.release_pending) {  // the GPU, not a host thread, waits for the consumer's step
      SLUICE_PIPELINE_CUDA_CHECK(cudaStreamWaitEvent(stream_, s.released, 0));
      s.release_pending = false;
    }
    SLUICE_PIPELINE_CUDA_CHECK(cudaEventRecord(s.copy_start, stream_));
    if (!skip_copy) {
      SLUICE_PIPELINE_CUDA_CHECK(
          cudaMemcpyAsync(s.samples, samples, sample_bytes, cudaMemcpyHostToDevice, stream_));
      SLUICE_PIPELINE_CUDA_CHECK(
          cudaMemcpyAsync(s.labels, labels, label_bytes, cudaMemcpyHostToDevice, stream_));
    }
    SLUICE_PIPELINE_CUDA_CHECK(cudaEventRecord(s.ready, stream_));
    auto* fn = new std::function<void()>(std::move(done));
    const cudaError_t err = cudaLaunchHostFunc(
        stream_,
        [](void* p) {
          auto* f = static_cast<std::function<void()>*>(p);
          (*f)();
          delete f;
        },
        fn);
    if (err != cudaSuccess) {
      delete fn;
      SLUICE_PIPELINE_CUDA_CHECK(err);
    }
    return absl::OkStatus();
  }

  const void* slot_samples(uint32_t slot) const override { return slots_[slot].samples; }
  const int32_t* slot_labels(uint32_t slot) const override { return slots_[slot].labels; }
  void* ready_event(uint32_t slot) const override { return slots_[slot].ready; }

  absl::Status ReleaseSlot(uint32_t slot, void* stream) override {
    if (stream == nullptr) return absl::OkStatus();
    SLUICE_PIPELINE_CUDA_CHECK(cudaSetDevice(device_));
    SLUICE_PIPELINE_CUDA_CHECK(
        cudaEventRecord(slots_[slot].released, static_cast<cudaStream_t>(stream)));
    slots_[slot].release_pending = true;
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CopyNs(uint32_t slot) override {
    float ms = 0;
    SLUICE_PIPELINE_CUDA_CHECK(cudaEventElapsedTime(&ms, slots_[slot].copy_start, slots_[slot].ready));
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<Slot> slots_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceUploader>> DeviceUploader::Create(int device,
                                                                       uint32_t ring_depth,
                                                                       size_t sample_bytes,
                                                                       size_t label_bytes) {
  if (!CudaDeviceAvailable()) return absl::UnavailableError("no CUDA device is present");
  auto u = std::make_unique<CudaUploader>();
  absl::Status s = u->Init(device, ring_depth, sample_bytes, label_bytes);
  if (!s.ok()) return s;
  return std::unique_ptr<DeviceUploader>(std::move(u));
}

}  // namespace sluice::pipeline_internal
