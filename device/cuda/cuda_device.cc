// device/device.h on the CUDA runtime: a stream is a non-blocking cudaStream_t, an event a
// cudaEvent_t, device memory cudaMalloc, pinned host memory cudaHostAlloc, callbacks
// cudaLaunchHostFunc. Every call is checked (SLUICE_CUDA_CHECK) and makes the device current
// first, so any thread may use the objects.
#include "device/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "device/cuda/cuda_status.h"

namespace sluice::device {

namespace cuda_internal {
namespace {

const char* CudaHint(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return "out of device memory: lower --batch-size or free the GPU (nvidia-smi shows who holds "
             "it)";
    case cudaErrorNoDevice:
      return "no CUDA device is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES, or use "
             "--device cpu";
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver (or one too old for this CUDA runtime): install the driver, or use "
             "--device cpu";
    case cudaErrorInvalidDevice:
      return "the device ordinal is out of range: see nvidia-smi for the devices present";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary holds sm_90 code plus PTX: rebuild with -DCMAKE_CUDA_ARCHITECTURES=<your "
             "sm>";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted: rerun under compute-sanitizer to find it";
    default:
      return "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call";
  }
}

absl::StatusCode CudaCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::Status(
      CudaCode(err), absl::StrCat(expr, " failed at ", file, ":", line, ": ", cudaGetErrorName(err),
                                  " (", cudaGetErrorString(err), "); hint: ", CudaHint(err)));
}

}  // namespace cuda_internal

namespace {

// The host time of one completed timing event: CUDA events only give the time between two
// events, so every timing event is placed on the host clock relative to this anchor.
struct ClockAnchor {
  cudaEvent_t event = nullptr;
  int64_t host_ns = 0;
};

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, cudaEvent_t event, bool timing, const ClockAnchor* anchor)
      : device_(device), event_(event), timing_(timing), anchor_(anchor) {}
  ~CudaEvent() override {
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
  }
  absl::Status Synchronize() override {
    SLUICE_CUDA_CHECK(cudaEventSynchronize(event_));
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> NanosSince(const Event& start) const override {
    const auto& s = static_cast<const CudaEvent&>(start);
    if (!timing_ || !s.timing_) {
      return absl::FailedPreconditionError("NanosSince: both events need timing");
    }
    float ms = 0;
    SLUICE_CUDA_CHECK(cudaEventElapsedTime(&ms, s.event_, event_));
    return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }
  absl::StatusOr<int64_t> HostNanos() const override {
    if (!timing_) return absl::FailedPreconditionError("HostNanos: the event has no timing");
    float ms = 0;
    SLUICE_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor_->event, event_));
    return anchor_->host_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }
  cudaEvent_t native() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_;
  bool timing_;
  const ClockAnchor* anchor_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(int device, cudaStream_t stream, bool owned = true)
      : device_(device), stream_(stream), owned_(owned) {}
  ~CudaStream() override {
    if (!owned_) return;  // a borrowed stream: its owner synchronizes and destroys it
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    cuda_internal::ClearLastCudaError();
  }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  }
  absl::Status Record(Event* event) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    SLUICE_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent*>(event)->native(), stream_));
    return absl::OkStatus();
  }
  absl::Status Wait(Event* event) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<CudaEvent*>(event)->native(), 0));
    return absl::OkStatus();
  }
  absl::Status AddCallback(std::function<void()> fn) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    auto* heap = new std::function<void()>(std::move(fn));
    const cudaError_t err = cudaLaunchHostFunc(
        stream_,
        [](void* p) {
          auto* f = static_cast<std::function<void()>*>(p);
          (*f)();
          delete f;
        },
        heap);
    if (err != cudaSuccess) delete heap;
    SLUICE_CUDA_CHECK(err);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  cudaStream_t native() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_;
  bool owned_;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {}
  ~CudaDevice() override {
    if (anchor_.event != nullptr) {
      cudaSetDevice(ordinal_);
      cudaEventDestroy(anchor_.event);
    }
  }

  // Records the clock anchor on a fresh stream and waits for it: the host time just after it
  // completed is its host time (off by the synchronization's latency, a few microseconds).
  absl::Status Anchor() {
    SLUICE_CUDA_CHECK(cudaSetDevice(ordinal_));
    SLUICE_CUDA_CHECK(cudaEventCreate(&anchor_.event));
    cudaStream_t s = nullptr;
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const cudaError_t record = cudaEventRecord(anchor_.event, s);
    const cudaError_t sync = record == cudaSuccess ? cudaEventSynchronize(anchor_.event) : record;
    anchor_.host_ns = SteadyNs();
    cudaStreamDestroy(s);
    SLUICE_CUDA_CHECK(sync);
    return absl::OkStatus();
  }
  std::string name() const override { return name_; }
  Platform platform() const override { return Platform::kCuda; }
  int ordinal() const override { return ordinal_; }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    SLUICE_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaStream_t s = nullptr;
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return std::unique_ptr<Stream>(std::make_unique<CudaStream>(ordinal_, s));
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(bool timing) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaEvent_t e = nullptr;
    SLUICE_CUDA_CHECK(
        cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(ordinal_, e, timing, &anchor_));
  }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(ordinal_));
    void* p = nullptr;
    SLUICE_CUDA_CHECK(cudaMalloc(&p, bytes));
    return MakeBuffer(Buffer::Kind::kDevice, p, bytes);
  }
  absl::StatusOr<Buffer> AllocatePinnedHost(size_t bytes) override {
    SLUICE_CUDA_CHECK(cudaSetDevice(ordinal_));
    void* p = nullptr;
    SLUICE_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return MakeBuffer(Buffer::Kind::kPinnedHost, p, bytes);
  }

 private:
  void Free(Buffer::Kind kind, void* data) override {
    cudaSetDevice(ordinal_);
    if (kind == Buffer::Kind::kDevice) {
      cudaFree(data);
    } else {
      cudaFreeHost(data);
    }
    cuda_internal::ClearLastCudaError();
  }

  int ordinal_;
  std::string name_;
  ClockAnchor anchor_;
};

}  // namespace

cudaStream_t NativeCudaStream(Stream* stream) {
  auto* s = dynamic_cast<CudaStream*>(stream);
  return s == nullptr ? nullptr : s->native();
}

std::unique_ptr<Stream> BorrowCudaStream(int ordinal, cudaStream_t stream) {
  return std::make_unique<CudaStream>(ordinal, stream, /*owned=*/false);
}

cudaEvent_t NativeCudaEvent(Event* event) {
  auto* e = dynamic_cast<CudaEvent*>(event);
  return e == nullptr ? nullptr : e->native();
}

absl::Status CudaDeviceStatus(int ordinal) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cuda_internal::ClearLastCudaError();
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorName(err), " (",
                     cudaGetErrorString(err), ")"));
  }
  if (n == 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount returned 0");
  if (ordinal < 0 || ordinal >= n) {
    return absl::UnavailableError(absl::StrCat("no CUDA device ", ordinal, ": only ", n,
                                               " device(s) present (cuda:0..cuda:", n - 1, ")"));
  }
  return absl::OkStatus();
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cuda_internal::ClearLastCudaError();
    return 0;
  }
  return n;
}

absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal) {
  RETURN_IF_ERROR(CudaDeviceStatus(ordinal));
  SLUICE_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaDeviceProp prop{};
  SLUICE_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  auto device = std::make_unique<CudaDevice>(
      ordinal,
      absl::StrCat("cuda:", ordinal, " (", prop.name, ", sm_", prop.major, prop.minor, ")"));
  RETURN_IF_ERROR(device->Anchor());
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace sluice::device
