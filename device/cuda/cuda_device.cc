// device/device.h on the CUDA runtime: a stream is a non-blocking cudaStream_t, an event a
// cudaEvent_t, device memory cudaMalloc, pinned host memory cudaHostAlloc, callbacks
// cudaLaunchHostFunc. Every call is checked (SLUICE_CUDA_CHECK) and makes the device current
// for the call only (ScopedDevice restores the caller's), so any thread may use the objects
// without its own current device changing.
#include "device/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/clock_anchor.h"
#include "device/cuda/cuda_status.h"
#include "device/cuda/spin_kernel.h"

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

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Makes `device` current for one call and restores the caller's current device afterwards:
// using a stream or a device never changes which device the caller's thread (a Python thread,
// say) has current.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : device_(device) {}
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (switched_) cudaSetDevice(previous_);
  }
  absl::Status Enter() {
    SLUICE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ == device_) return absl::OkStatus();
    SLUICE_CUDA_CHECK(cudaSetDevice(device_));
    switched_ = true;
    return absl::OkStatus();
  }

 private:
  int device_;
  int previous_ = 0;
  bool switched_ = false;
};
#define SLUICE_ON_DEVICE(device)       \
  ScopedDevice scoped_device_(device); \
  RETURN_IF_ERROR(scoped_device_.Enter())

// A timing query of an event whose record has not completed (or was never made) is the
// caller's error, not the device's: kFailedPrecondition, as device.h promises.
absl::Status NotCompletedOr(cudaError_t err, const char* what) {
  if (err == cudaErrorNotReady || err == cudaErrorInvalidResourceHandle) {
    cuda_internal::ClearLastCudaError();
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the event's last record has not completed"));
  }
  return absl::OkStatus();
}

// The clock anchors of one device (device/clock_anchor.h): timing events placed on the host
// clock relative to the newest anchor, re-taken by RefreshClockAnchor. Every anchor event is
// kept until the device closes, so an event being placed on another thread never reads an
// anchor event that was destroyed or recorded again. Thread safe.
class ClockAnchors {
 public:
  ~ClockAnchors() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  // Records a new anchor: the tightest of three host windows around an anchor event's
  // completion, on a fresh stream with nothing before it.
  absl::Status Take() {
    cudaStream_t s = nullptr;
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    absl::Status status = TakeOn(s);
    cudaStreamDestroy(s);
    return status;
  }
  // The host time of timing event `e`, whose last record has completed.
  absl::StatusOr<int64_t> HostNanos(cudaEvent_t e) const {
    cudaEvent_t anchor = nullptr, previous = nullptr;
    int64_t anchor_ns = 0, previous_ns = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      anchor = current_;
      anchor_ns = host_ns_;
      previous = previous_;
      previous_ns = previous_host_ns_;
    }
    float ms = 0;
    cudaError_t err = cudaEventElapsedTime(&ms, anchor, e);
    if (err != cudaSuccess && previous != nullptr) {
      // An event recorded before the newest anchor: placed by the one before it.
      cuda_internal::ClearLastCudaError();
      err = cudaEventElapsedTime(&ms, previous, e);
      anchor_ns = previous_ns;
    }
    RETURN_IF_ERROR(NotCompletedOr(err, "HostNanos"));
    SLUICE_CUDA_CHECK(err);
    return HostNsFromAnchor(anchor_ns, ms);
  }
  int64_t host_ns() const {
    std::lock_guard<std::mutex> l(mu_);
    return host_ns_;
  }

 private:
  absl::Status TakeOn(cudaStream_t s) {
    cudaEvent_t best = nullptr;
    AnchorWindow best_window;
    for (int attempt = 0; attempt < 3; ++attempt) {
      cudaEvent_t e = nullptr;
      SLUICE_CUDA_CHECK(cudaEventCreate(&e));
      AnchorWindow w;
      w.before_ns = SteadyNs();
      cudaError_t err = cudaEventRecord(e, s);
      if (err == cudaSuccess) err = cudaEventSynchronize(e);
      w.after_ns = SteadyNs();
      if (err != cudaSuccess || (best != nullptr && w.width() >= best_window.width())) {
        cudaEventDestroy(e);
        SLUICE_CUDA_CHECK(err);
        continue;
      }
      if (best != nullptr) cudaEventDestroy(best);
      best = e;
      best_window = w;
    }
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(best);
    previous_ = current_;
    previous_host_ns_ = host_ns_;
    current_ = best;
    host_ns_ = best_window.host_ns();
    return absl::OkStatus();
  }

  mutable std::mutex mu_;
  std::vector<cudaEvent_t> events_;  // every anchor taken, newest last
  cudaEvent_t current_ = nullptr;
  int64_t host_ns_ = 0;
  cudaEvent_t previous_ = nullptr;  // the anchor before current_ (null: none)
  int64_t previous_host_ns_ = 0;
};

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, cudaEvent_t event, bool timing, const ClockAnchors* anchors)
      : device_(device), event_(event), timing_(timing), anchors_(anchors) {}
  ~CudaEvent() override {
    ScopedDevice on(device_);
    if (on.Enter().ok()) cudaEventDestroy(event_);
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
    const cudaError_t err = cudaEventElapsedTime(&ms, s.event_, event_);
    RETURN_IF_ERROR(NotCompletedOr(err, "NanosSince"));
    SLUICE_CUDA_CHECK(err);
    return NsFromElapsedMs(ms);
  }
  absl::StatusOr<int64_t> HostNanos() const override {
    if (!timing_) return absl::FailedPreconditionError("HostNanos: the event has no timing");
    const cudaError_t query = cudaEventQuery(event_);
    RETURN_IF_ERROR(NotCompletedOr(query, "HostNanos"));
    SLUICE_CUDA_CHECK(query);
    return anchors_->HostNanos(event_);
  }
  cudaEvent_t native() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_;
  bool timing_;
  const ClockAnchors* anchors_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(int device, cudaStream_t stream, bool owned = true)
      : device_(device), stream_(stream), owned_(owned) {}
  ~CudaStream() override {
    if (!owned_) return;  // a borrowed stream: its owner synchronizes and destroys it
    ScopedDevice on(device_);
    if (!on.Enter().ok()) return;
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    cuda_internal::ClearLastCudaError();
  }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    SLUICE_ON_DEVICE(device_);
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    SLUICE_ON_DEVICE(device_);
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  }
  absl::Status Record(Event* event) override {
    SLUICE_ON_DEVICE(device_);
    SLUICE_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent*>(event)->native(), stream_));
    return absl::OkStatus();
  }
  absl::Status Wait(Event* event) override {
    SLUICE_ON_DEVICE(device_);
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<CudaEvent*>(event)->native(), 0));
    return absl::OkStatus();
  }
  absl::Status AddCallback(std::function<void()> fn) override {
    SLUICE_ON_DEVICE(device_);
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
  absl::Status Delay(int64_t us) override {
    SLUICE_ON_DEVICE(device_);
    SLUICE_CUDA_CHECK(cuda_internal::LaunchSpinKernel(us * 1000, stream_));
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
  // Takes the first clock anchor (the device is current on the calling thread).
  absl::Status Anchor() { return anchors_.Take(); }
  absl::Status RefreshClockAnchor(int64_t max_age_ns) override {
    if (SteadyNs() - anchors_.host_ns() <= max_age_ns) return absl::OkStatus();
    SLUICE_ON_DEVICE(ordinal_);
    return anchors_.Take();
  }
  std::string name() const override { return name_; }
  Platform platform() const override { return Platform::kCuda; }
  int ordinal() const override { return ordinal_; }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    SLUICE_ON_DEVICE(ordinal_);
    cudaStream_t s = nullptr;
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return std::unique_ptr<Stream>(std::make_unique<CudaStream>(ordinal_, s));
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(bool timing) override {
    SLUICE_ON_DEVICE(ordinal_);
    cudaEvent_t e = nullptr;
    SLUICE_CUDA_CHECK(
        cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(ordinal_, e, timing, &anchors_));
  }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override {
    SLUICE_ON_DEVICE(ordinal_);
    void* p = nullptr;
    SLUICE_CUDA_CHECK(cudaMalloc(&p, bytes));
    return MakeBuffer(Buffer::Kind::kDevice, p, bytes);
  }
  absl::StatusOr<Buffer> AllocatePinnedHost(size_t bytes) override {
    SLUICE_ON_DEVICE(ordinal_);
    void* p = nullptr;
    SLUICE_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return MakeBuffer(Buffer::Kind::kPinnedHost, p, bytes);
  }

 private:
  void Free(Buffer::Kind kind, void* data) override {
    ScopedDevice on(ordinal_);
    (void)on.Enter();
    if (kind == Buffer::Kind::kDevice) {
      cudaFree(data);
    } else {
      cudaFreeHost(data);
    }
    cuda_internal::ClearLastCudaError();
  }

  int ordinal_;
  std::string name_;
  ClockAnchors anchors_;
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
