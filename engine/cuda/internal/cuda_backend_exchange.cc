// CudaBackend's gradient exchange in data-parallel runs (docs/distributed.md): each layer's
// gradients are summed by NCCL on the comm stream as soon as backward has produced them
// (ExchangeLayer, ordered after the compute stream by an event per layer), the optimizer waits
// for the last sum (ExchangeGradients), and WaitStream waits for a stream while polling NCCL's
// asynchronous errors, since a failed peer makes a collective hang rather than fail. One GPU:
// each is a no-op or a plain stream synchronize. InitExchange, which sets the communicator up
// from the BackendOptions, is in cuda_backend.cc.
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/internal/cuda_backend_impl.h"

namespace sluice::cuda_internal {

absl::Status CudaBackend::ExchangeLayer(int l) {
  if (!exchanging()) return absl::OkStatus();
#if SLUICE_HAVE_NCCL
  const int64_t begin = offsets_[2 * l];
  const int64_t end =
      2 * l + 2 < static_cast<int>(offsets_.size()) ? offsets_[2 * l + 2] : num_params_;
  cudaCheck(cudaEventRecord(layer_ready_[l], stream_));
  cudaCheck(cudaStreamWaitEvent(comm_stream_, layer_ready_[l], 0));
  SLUICE_NCCL_CHECK(nccl_api_->AllReduce(grads_ + begin, grads_ + begin,
                                         static_cast<size_t>(end - begin), ncclFloat32, ncclSum,
                                         nccl_, comm_stream_));
  exchange_.bytes += (end - begin) * static_cast<int64_t>(sizeof(float));
#endif
  return absl::OkStatus();
}

absl::Status CudaBackend::ExchangeGradients() {
  if (!exchanging()) return absl::OkStatus();
  cudaCheck(cudaEventRecord(exchanged_, comm_stream_));
  cudaCheck(cudaStreamWaitEvent(stream_, exchanged_, 0));
  ++exchange_.steps;
  return absl::OkStatus();
}

absl::Status CudaBackend::WaitStream(cudaStream_t stream) {
#if SLUICE_HAVE_NCCL
  if (nccl_ != nullptr) {
    while (true) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) cudaCheck(q);
      ncclResult_t async = ncclSuccess;
      SLUICE_NCCL_CHECK(nccl_api_->CommGetAsyncError(nccl_, &async));
      if (async != ncclSuccess) {
        nccl_api_->CommAbort(nccl_);
        nccl_ = nullptr;
        return absl::InternalError(absl::StrCat("NCCL all-reduce of the gradients failed: ",
                                                nccl_api_->GetErrorString(async)));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return absl::OkStatus();
  }
#endif
  cudaCheck(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace sluice::cuda_internal
