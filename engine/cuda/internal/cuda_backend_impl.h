// CudaBackend: the Backend of engine/backend.h on one CUDA GPU (engine/cuda/cuda_backend.h
// draws its step; CreateCudaBackend makes one). The class is private to the CUDA backend and
// its parts live in four files: engine/cuda/cuda_backend.cc (construction and Init from the
// BackendOptions, the batch check, TrainStep and the kernels a step enqueues: forward,
// backward, optimizer), cuda_backend_step.cc (staging a batch, running the step eagerly or as
// a captured CUDA Graph, reading the loss back, evaluation), cuda_backend_exchange.cc (the
// NCCL gradient exchange of data-parallel runs) and cuda_backend_state.cc (SaveState /
// LoadState). Also here: NvtxRange, the Nsight Systems range each phase opens, and
// SLUICE_NCCL_CHECK, which turns an NCCL error into an absl::Status naming the call.
// Thread safety: one thread at a time (as every Backend).
#ifndef SLUICE_ENGINE_CUDA_INTERNAL_CUDA_BACKEND_IMPL_H_
#define SLUICE_ENGINE_CUDA_INTERNAL_CUDA_BACKEND_IMPL_H_

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "device/device.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_allocator.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/linear_gemm.h"
#if SLUICE_HAVE_NCCL
#include "engine/cuda/nccl_loader.h"
#endif

namespace sluice::cuda_internal {

struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

#if SLUICE_HAVE_NCCL
// For CudaBackend's members: reads nccl_api_.
#define SLUICE_NCCL_CHECK(call)                                                                    \
  do {                                                                                             \
    const ncclResult_t sluice_nccl_rc = (call);                                                    \
    if (sluice_nccl_rc != ncclSuccess) {                                                           \
      return absl::InternalError(absl::StrCat(#call, " failed at ", __FILE__, ":", __LINE__, ": ", \
                                              nccl_api_->GetErrorString(sluice_nccl_rc)));         \
    }                                                                                              \
  } while (0)
#endif

// The batch's remaining normalization (BatchView::normalization, per channel of its sample
// spec) as the input conversion kernel's argument; a null one is ToTensor (x/255).
// kInvalidArgument when it does not fit the channels or the kernel's channel limit.
absl::StatusOr<ChannelAffine> DeviceNormalization(const Normalization* normalization,
                                                  const SampleSpec& sample);

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelState& state, const OptimizerConfig& opt, const BackendOptions& options,
              const CudaBackendOptions& cuda);
  ~CudaBackend() override;

  absl::Status Init(const ModelState& state);

  std::string name() const override { return name_; }
  device::Platform platform() const override { return device::Platform::kCuda; }
  absl::Status TrainStep(const BatchView& batch, float lr) override;
  absl::StatusOr<LossStats> TakeLoss() override;
  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override;
  absl::Status Synchronize() override;
  absl::StatusOr<ModelState> SaveState() override;
  absl::Status LoadState(const ModelState& state) override;
  MemoryReport memory() const override { return alloc_.report(); }
  ExchangeStats exchange() const override { return exchange_; }
  device::Stream* compute_stream() const override { return compute_stream_.get(); }
  device::Device* device() const override { return device_obj_.get(); }

 private:
  // Where the step reads its batch from (device pointers).
  struct Input {
    const void* samples;
    const int32_t* labels;
    H2DFormat format;
    int B;
    ChannelAffine norm;  // what remains to normalize (u8 batches), from the batch
  };
  using GraphKey = std::tuple<int, int>;  // (batch size, format)

  int L() const { return layout_.model.num_linear(); }
  int width(int k) const { return layout_.model.layers[k]; }
  bool low_precision() const { return lp_ != DType::kF32; }
  const void* weight_operand(int l) const {
    return low_precision() ? static_cast<const void*>(static_cast<const char*>(params_lp_) +
                                                      DTypeSize(lp_) * offsets_[2 * l])
                           : static_cast<const void*>(params_ + offsets_[2 * l]);
  }

  absl::Status CheckBatch(const BatchView& batch) const;
  // Waits on the batch's event and, when needed, copies it into the staging buffers.
  absl::StatusOr<Input> Stage(const BatchView& batch, bool force_staging);
  absl::Status EnqueueForward(const Input& in, bool train);
  absl::Status EnqueueBackward(const Input& in);
  // Data-parallel training (docs/distributed.md): NCCL sums each layer's gradients on
  // comm_stream_ as soon as backward has produced them (an event per layer orders it after the
  // compute stream), while backward goes on with the layers below; the optimizer waits for the
  // last sum. One GPU: nothing to do.
  bool exchanging() const;
  absl::Status InitExchange();
  // Enqueues the sum of layer l's weight and bias gradients (contiguous in grads_).
  absl::Status ExchangeLayer(int l);
  // The gradient exchange point: after backward, before the optimizer. Makes the compute
  // stream wait for every layer's sum.
  absl::Status ExchangeGradients();
  // cudaStreamSynchronize that also polls NCCL's asynchronous errors (a peer that failed makes
  // a collective hang, never fail): the error names the NCCL failure.
  absl::Status WaitStream(cudaStream_t stream);
  absl::Status EnqueueOptimizer();
  absl::Status EnqueueTrainBody(const Input& in);
  absl::Status RunGraphed(const Input& in);
  absl::Status RefreshLowPrecisionWeights();
  absl::Status ReadScalars();

  ModelState layout_;  // names and shapes (values cleared after Init)
  OptimizerConfig opt_;
  BackendOptions options_;
  CudaBackendOptions cuda_;
  DType lp_;
  int device_ = 0;
  std::string name_;
  std::unique_ptr<device::Device> device_obj_;
  std::unique_ptr<device::Stream> compute_stream_;  // destroyed before device_obj_
  cudaStream_t stream_ = nullptr;                   // compute_stream_'s native handle
  DeviceAllocator alloc_;
  std::unique_ptr<LinearGemm> gemm_;

  int64_t num_params_ = 0;
  std::vector<int64_t> offsets_;  // element offset of params[i] in params_
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* slots_ = nullptr;  // state_slots() * num_params_
  void* params_lp_ = nullptr;
  std::vector<float*> act_, dact_;  // per Linear: output [B, n_{l+1}] and its gradient
  std::vector<void*> act_lp_;       // reduced-precision copies of hidden outputs
  void* dy_lp_ = nullptr;           // reduced-precision copy of the current dy
  void* x_ = nullptr;               // normalized input [B, n_0] in the operand type
  void* staging_samples_ = nullptr;
  int32_t* staging_labels_ = nullptr;
  StepScalars* scalars_ = nullptr;
  StepScalars* host_scalars_ = nullptr;  // pinned, for readback

  ExchangeStats exchange_;
#if SLUICE_HAVE_NCCL
  const NcclApi* nccl_api_ = nullptr;
  ncclComm_t nccl_ = nullptr;
#endif
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> layer_ready_;  // per layer: its gradients are complete
  cudaEvent_t exchanged_ = nullptr;       // every layer's sum is done

  std::map<GraphKey, int> eager_runs_;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  // The normalization the graphs were captured with (a kernel argument baked into them): a
  // batch with another one drops them.
  ChannelAffine graph_norm_;
  int64_t pending_samples_ = 0;
  int divisor_ = 0;  // the current step's global batch size (0: its own B)
};

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_INTERNAL_CUDA_BACKEND_IMPL_H_
