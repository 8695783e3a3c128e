// The CUDA backend. Why things are the way they are:
// - All parameters live in ONE flat f32 buffer (gradients and optimizer slots likewise), laid
//   out in ModelState order: the optimizer is then a single launch over every tensor, and
//   SaveState/LoadState are one copy each way.
// - lr, the fp16 loss scale and the optimizer step count live on the device (StepScalars), so
//   a captured CUDA Graph is reusable across steps; lr is written by a kernel before launch.
// - The graph reads the batch from fixed staging buffers, so with cuda_graph on a device batch
//   is first copied (device to device, ~100 KB) into them; without graphs it is read in place.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#if SLUICE_HAVE_NCCL
#include "engine/cuda/nccl_loader.h"
#endif

#include <algorithm>
#include <chrono>
#include <thread>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cuda/cuda_device.h"
#include "device/device.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cublaslt_loader.h"
#include "engine/cuda/device_allocator.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/linear_gemm.h"

namespace sluice {
namespace {

using cuda_internal::DeviceAllocator;
using cuda_internal::DType;
using cuda_internal::DTypeSize;
using cuda_internal::LinearGemm;
using cuda_internal::StepScalars;

constexpr size_t kGemmWorkspaceBytes = 32u << 20;  // cuBLASLt's recommendation for Hopper
constexpr float kInitialFp16LossScale = 65536.0f;  // as torch.cuda.amp.GradScaler

struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

DType OperandType(Precision p) {
  switch (p) {
    case Precision::kBF16: return DType::kBF16;
    case Precision::kF16: return DType::kF16;
    default: return DType::kF32;
  }
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelState& state, const OptimizerConfig& opt, const BackendOptions& options,
              const CudaBackendOptions& cuda)
      : layout_(state),
        opt_(opt),
        options_(options),
        cuda_(cuda),
        lp_(OperandType(options.precision)) {}
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
  };
  using GraphKey = std::tuple<int, int>;  // (batch size, format)

  int L() const { return layout_.model.num_linear(); }
  int width(int k) const { return layout_.model.layers[k]; }
  bool low_precision() const { return lp_ != DType::kF32; }
  const void* weight_operand(int l) const {
    return low_precision()
               ? static_cast<const void*>(static_cast<const char*>(params_lp_) +
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
  bool exchanging() const {
    return options_.gradient_comm != nullptr &&
           (options_.gradient_comm->is_distributed() || options_.exchange_in_world_of_one);
  }
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
  const cuda_internal::NcclApi* nccl_api_ = nullptr;
  ncclComm_t nccl_ = nullptr;
#endif
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> layer_ready_;  // per layer: its gradients are complete
  cudaEvent_t exchanged_ = nullptr;       // every layer's sum is done

  std::map<GraphKey, int> eager_runs_;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  int64_t pending_samples_ = 0;
  int divisor_ = 0;  // the current step's global batch size (0: its own B)
};

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
  }
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
#if SLUICE_HAVE_NCCL
  if (nccl_ != nullptr) nccl_api_->CommDestroy(nccl_);
#endif
  for (cudaEvent_t e : layer_ready_) cudaEventDestroy(e);
  if (exchanged_ != nullptr) cudaEventDestroy(exchanged_);
  if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  gemm_.reset();
  alloc_.FreeAll();
  if (host_scalars_ != nullptr) cudaFreeHost(host_scalars_);
  cuda_internal::ClearLastCudaError();
}

absl::Status CudaBackend::Init(const ModelState& state) {
  device_ = cuda_.ordinal;
  cudaCheck(cudaSetDevice(device_));
  ASSIGN_OR_RETURN(device_obj_, device::OpenCudaDevice(device_));
  name_ = device_obj_->name();
  ASSIGN_OR_RETURN(compute_stream_, device_obj_->CreateStream());
  stream_ = device::NativeCudaStream(compute_stream_.get());
  cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&host_scalars_), sizeof(StepScalars)));

  const int B = options_.max_batch;
  for (const HostTensor& t : layout_.params) {
    offsets_.push_back(num_params_);
    num_params_ += static_cast<int64_t>(t.values.size());
  }
  ASSIGN_OR_RETURN(params_, alloc_.AllocateArray<float>(MemoryTag::kParameters, num_params_));
  ASSIGN_OR_RETURN(grads_, alloc_.AllocateArray<float>(MemoryTag::kGradients, num_params_));
  ASSIGN_OR_RETURN(slots_, alloc_.AllocateArray<float>(MemoryTag::kOptimizerState,
                                                       num_params_ * opt_.state_slots()));
  for (int l = 0; l < L(); ++l) {
    const int64_t n = int64_t{B} * width(l + 1);
    ASSIGN_OR_RETURN(float* a, alloc_.AllocateArray<float>(MemoryTag::kActivations, n));
    ASSIGN_OR_RETURN(float* d, alloc_.AllocateArray<float>(MemoryTag::kActivations, n));
    act_.push_back(a);
    dact_.push_back(d);
  }
  const int64_t n0 = width(0);
  ASSIGN_OR_RETURN(x_, alloc_.Allocate(MemoryTag::kInputBatches, B * n0 * DTypeSize(lp_)));
  ASSIGN_OR_RETURN(staging_samples_,
                   alloc_.Allocate(MemoryTag::kInputBatches, B * n0 * sizeof(float)));
  ASSIGN_OR_RETURN(staging_labels_, alloc_.AllocateArray<int32_t>(MemoryTag::kInputBatches, B));
  if (low_precision()) {
    ASSIGN_OR_RETURN(params_lp_,
                     alloc_.Allocate(MemoryTag::kWorkspace, num_params_ * DTypeSize(lp_)));
    int max_width = 0;
    for (int l = 0; l < L(); ++l) {
      max_width = std::max(max_width, width(l + 1));
      if (l + 1 < L()) {
        ASSIGN_OR_RETURN(void* a, alloc_.Allocate(MemoryTag::kWorkspace,
                                                  int64_t{B} * width(l + 1) * DTypeSize(lp_)));
        act_lp_.push_back(a);
      }
    }
    ASSIGN_OR_RETURN(dy_lp_, alloc_.Allocate(MemoryTag::kWorkspace,
                                             int64_t{B} * max_width * DTypeSize(lp_)));
  }
  ASSIGN_OR_RETURN(scalars_, alloc_.AllocateArray<StepScalars>(MemoryTag::kWorkspace, 1));
  ASSIGN_OR_RETURN(void* ws, alloc_.Allocate(MemoryTag::kWorkspace, kGemmWorkspaceBytes));
  ASSIGN_OR_RETURN(gemm_, LinearGemm::Create(lp_, ws, kGemmWorkspaceBytes));

  StepScalars init{};
  init.loss_scale = options_.precision == Precision::kF16 ? kInitialFp16LossScale : 1.0f;
  init.lr = opt_.lr;
  *host_scalars_ = init;
  cudaCheck(cudaMemcpyAsync(scalars_, host_scalars_, sizeof(StepScalars),
                            cudaMemcpyHostToDevice, stream_));
  RETURN_IF_ERROR(LoadState(state));
  RETURN_IF_ERROR(InitExchange());
  for (HostTensor& t : layout_.params) t.values = {};
  for (HostTensor& t : layout_.opt_state) t.values = {};
  return absl::OkStatus();
}

#if SLUICE_HAVE_NCCL
#define SLUICE_NCCL_CHECK(call)                                                          \
  do {                                                                                   \
    const ncclResult_t sluice_nccl_rc = (call);                                          \
    if (sluice_nccl_rc != ncclSuccess) {                                                 \
      return absl::InternalError(absl::StrCat(#call, " failed at ", __FILE__, ":",       \
                                              __LINE__, ": ",                            \
                                              nccl_api_->GetErrorString(sluice_nccl_rc))); \
    }                                                                                    \
  } while (0)
#endif

absl::Status CudaBackend::InitExchange() {
  if (!exchanging()) return absl::OkStatus();
  if (cuda_.cuda_graph) {
    return absl::InvalidArgumentError(
        "--cuda-graph is not supported in data-parallel runs yet (each step's divisor, the "
        "global batch's sample count, is agreed on the host); run without it");
  }
#if SLUICE_HAVE_NCCL
  dist::Communicator* comm = options_.gradient_comm;
  ASSIGN_OR_RETURN(nccl_api_, cuda_internal::LoadNccl());
  // llm.c's bootstrap: rank 0 makes the unique id, MPI carries it to the others.
  ncclUniqueId id;
  if (comm->rank() == 0) SLUICE_NCCL_CHECK(nccl_api_->GetUniqueId(&id));
  RETURN_IF_ERROR(comm->Broadcast(&id, sizeof(id), 0));
  SLUICE_NCCL_CHECK(nccl_api_->CommInitRank(&nccl_, comm->size(), id, comm->rank()));
  cudaCheck(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
  layer_ready_.resize(L(), nullptr);
  for (cudaEvent_t& e : layer_ready_) {
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  cudaCheck(cudaEventCreateWithFlags(&exchanged_, cudaEventDisableTiming));
  const int v = nccl_api_->version;
  name_ = absl::StrCat(name_, ", NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100, " rank ",
                       comm->rank(), "/", comm->size());
  return absl::OkStatus();
#else
  return absl::UnavailableError(
      "data-parallel training on CUDA needs NCCL, and this sluice was built without it "
      "(nccl.h and libnccl were not found beside the CUDA toolkit)");
#endif
}

absl::Status CudaBackend::ExchangeLayer(int l) {
  if (!exchanging()) return absl::OkStatus();
#if SLUICE_HAVE_NCCL
  const int64_t begin = offsets_[2 * l];
  const int64_t end = 2 * l + 2 < static_cast<int>(offsets_.size()) ? offsets_[2 * l + 2]
                                                                     : num_params_;
  cudaCheck(cudaEventRecord(layer_ready_[l], stream_));
  cudaCheck(cudaStreamWaitEvent(comm_stream_, layer_ready_[l], 0));
  SLUICE_NCCL_CHECK(nccl_api_->AllReduce(grads_ + begin, grads_ + begin, static_cast<size_t>(end - begin),
                                  ncclFloat32, ncclSum, nccl_, comm_stream_));
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

absl::Status CudaBackend::CheckBatch(const BatchView& b) const {
  if (b.samples == nullptr || b.labels == nullptr) {
    return absl::InvalidArgumentError("batch has no samples or labels");
  }
  if (static_cast<int>(b.features) != width(0)) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", b.features,
                                                   " features per sample, the model takes ",
                                                   width(0)));
  }
  // A data-parallel rank's share of a step may be empty; it still joins the exchange.
  const int min_size = exchanging() ? 0 : 1;
  if (static_cast<int>(b.size) < min_size || static_cast<int>(b.size) > options_.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", b.size, " outside [",
                                                   min_size, ", ", options_.max_batch,
                                                   "] (max_batch)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaBackend::Input> CudaBackend::Stage(const BatchView& b, bool force_staging) {
  NvtxRange range("StageBatch");
  if (b.ready_event != nullptr) {
    RETURN_IF_ERROR(compute_stream_->Wait(b.ready_event));
  }
  Input in{b.samples, b.labels, b.format, static_cast<int>(b.size)};
  if (b.on_device && !force_staging) return in;
  // Host batches (pageable or pinned): cudaMemcpyAsync returns once the source has been read
  // or staged by the driver, so the caller may reuse its buffer when TrainStep returns.
  const cudaMemcpyKind kind = b.on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  const size_t bytes = size_t{b.size} * b.features * H2DFormatSize(b.format);
  cudaCheck(cudaMemcpyAsync(staging_samples_, b.samples, bytes, kind, stream_));
  cudaCheck(cudaMemcpyAsync(staging_labels_, b.labels, sizeof(int32_t) * b.size, kind, stream_));
  in.samples = staging_samples_;
  in.labels = staging_labels_;
  return in;
}

absl::Status CudaBackend::EnqueueForward(const Input& in, bool train) {
  NvtxRange range(train ? "Forward" : "EvalForward");
  const void* x = in.samples;
  if (in.format != H2DFormat::kF32 || low_precision()) {
    RETURN_IF_ERROR(cuda_internal::LaunchConvertInput(in.samples, in.format,
                                                      int64_t{in.B} * width(0),
                                                      options_.normalization, x_, lp_, stream_));
    x = x_;
  }
  for (int l = 0; l < L(); ++l) {
    const bool hidden = l + 1 < L();
    const void* input = l == 0 ? x : (low_precision() ? act_lp_[l - 1] : act_[l - 1]);
    RETURN_IF_ERROR(gemm_->Forward(input, weight_operand(l), params_ + offsets_[2 * l + 1],
                                   in.B, width(l), width(l + 1), hidden, act_[l], stream_));
    if (hidden && low_precision()) {
      RETURN_IF_ERROR(cuda_internal::LaunchCast(act_[l], int64_t{in.B} * width(l + 1),
                                                act_lp_[l], lp_, stream_));
    }
  }
  const int C = width(L());
  return cuda_internal::LaunchSoftmaxCrossEntropy(
      act_[L() - 1], in.labels, in.B, C, train ? &scalars_->loss_scale : nullptr,
      train ? dact_[L() - 1] : nullptr, train ? &scalars_->train_loss_sum : &scalars_->eval_loss_sum,
      train ? &scalars_->train_correct : &scalars_->eval_correct, &scalars_->bad_label, stream_,
      train ? divisor_ : 0);
}

absl::Status CudaBackend::EnqueueBackward(const Input& in) {
  NvtxRange range("Backward");
  const int B = in.B;
  for (int l = L() - 1; l >= 0; --l) {
    const int I = width(l), O = width(l + 1);
    const float* dy = dact_[l];
    const void* dy_op = dy;
    if (low_precision()) {
      RETURN_IF_ERROR(cuda_internal::LaunchCast(dy, int64_t{B} * O, dy_lp_, lp_, stream_));
      dy_op = dy_lp_;
    }
    const void* x = l == 0 ? (in.format != H2DFormat::kF32 || low_precision() ? x_ : in.samples)
                           : (low_precision() ? act_lp_[l - 1] : act_[l - 1]);
    RETURN_IF_ERROR(
        cuda_internal::LaunchBiasGrad(dy, B, O, grads_ + offsets_[2 * l + 1], stream_));
    RETURN_IF_ERROR(gemm_->BackwardWeights(x, dy_op, B, I, O, grads_ + offsets_[2 * l], stream_));
    RETURN_IF_ERROR(ExchangeLayer(l));  // overlaps the layers below
    if (l > 0) {
      RETURN_IF_ERROR(gemm_->BackwardInput(dy_op, weight_operand(l), B, I, O, dact_[l - 1],
                                           stream_));
      RETURN_IF_ERROR(cuda_internal::LaunchReluBackward(act_[l - 1], int64_t{B} * I,
                                                        dact_[l - 1], stream_));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueOptimizer() {
  NvtxRange range("Optimizer");
  const bool fp16 = options_.precision == Precision::kF16;
  if (fp16) {
    RETURN_IF_ERROR(
        cuda_internal::LaunchCheckFinite(grads_, num_params_, &scalars_->found_inf, stream_));
  }
  cuda_internal::OptimizerStepArgs args;
  args.params = params_;
  args.grads = grads_;
  args.slot0 = opt_.state_slots() >= 1 ? slots_ : nullptr;
  args.slot1 = opt_.state_slots() >= 2 ? slots_ + num_params_ : nullptr;
  args.params_lp = params_lp_;
  args.lp_type = lp_;
  args.n = num_params_;
  args.config = opt_;
  args.scalars = scalars_;
  RETURN_IF_ERROR(cuda_internal::LaunchOptimizerStep(args, stream_));
  return cuda_internal::LaunchFinishStep(scalars_, fp16, stream_);
}

absl::Status CudaBackend::EnqueueTrainBody(const Input& in) {
  if (in.B == 0) {  // this rank's share is empty: zero gradients join the exchange
    cudaCheck(cudaMemsetAsync(grads_, 0, sizeof(float) * num_params_, stream_));
    for (int l = L() - 1; l >= 0; --l) RETURN_IF_ERROR(ExchangeLayer(l));
  } else {
    RETURN_IF_ERROR(EnqueueForward(in, /*train=*/true));
    RETURN_IF_ERROR(EnqueueBackward(in));
  }
  {
    NvtxRange range("ExchangeGradients");
    RETURN_IF_ERROR(ExchangeGradients());
  }
  return EnqueueOptimizer();
}

absl::Status CudaBackend::RunGraphed(const Input& in) {
  const GraphKey key{in.B, static_cast<int>(in.format)};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // The first step of each shape runs eagerly: it creates the cuBLASLt plans and loads the
    // kernels outside of capture. The second one is captured.
    if (eager_runs_[key]++ == 0) return EnqueueTrainBody(in);
    NvtxRange range("CaptureStepGraph");
    cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    absl::Status body = EnqueueTrainBody(in);
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!body.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      cuda_internal::ClearLastCudaError();
      return body;
    }
    cudaCheck(end);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cudaCheck(inst);
    it = graphs_.emplace(key, exec).first;
  }
  NvtxRange range("LaunchStepGraph");
  cudaCheck(cudaGraphLaunch(it->second, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::TrainStep(const BatchView& batch, float lr) {
  NvtxRange range("TrainStep");
  RETURN_IF_ERROR(CheckBatch(batch));
  cudaCheck(cudaSetDevice(device_));
  divisor_ = 0;
  if (exchanging()) {
    // The mean is over the whole global batch: agree on its sample count first (a rank may
    // have skipped corrupt frames).
    int64_t global = batch.size;
    RETURN_IF_ERROR(options_.gradient_comm->AllReduceSum(&global, 1));
    if (global == 0) return absl::OkStatus();
    divisor_ = static_cast<int>(global);
  }
  ASSIGN_OR_RETURN(Input in, Stage(batch, /*force_staging=*/cuda_.cuda_graph));
  RETURN_IF_ERROR(cuda_internal::LaunchSetLr(scalars_, lr, stream_));
  pending_samples_ += in.B;
  if (cuda_.cuda_graph) return RunGraphed(in);
  return EnqueueTrainBody(in);
}

absl::Status CudaBackend::ReadScalars() {
  cudaCheck(cudaMemcpyAsync(host_scalars_, scalars_, sizeof(StepScalars),
                            cudaMemcpyDeviceToHost, stream_));
  return WaitStream(stream_);
}

absl::StatusOr<LossStats> CudaBackend::TakeLoss() {
  cudaCheck(cudaSetDevice(device_));
  RETURN_IF_ERROR(ReadScalars());
  LossStats out;
  out.samples = pending_samples_;
  out.correct = static_cast<int64_t>(host_scalars_->train_correct);
  out.mean_loss = pending_samples_ ? host_scalars_->train_loss_sum / pending_samples_ : 0.0;
  const bool bad_label = host_scalars_->bad_label != 0;
  pending_samples_ = 0;
  cudaCheck(cudaMemsetAsync(&scalars_->train_loss_sum, 0, sizeof(double), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->train_correct, 0, sizeof(unsigned long long), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->bad_label, 0, sizeof(int), stream_));
  if (bad_label) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a training label was outside [0, ", width(L()), "); those samples were ignored"));
  }
  return out;
}

absl::Status CudaBackend::Evaluate(const BatchView& batch, EvalStats* stats) {
  NvtxRange range("Evaluate");
  RETURN_IF_ERROR(CheckBatch(batch));
  if (batch.size == 0) return absl::OkStatus();  // a rank's empty share of the test split
  cudaCheck(cudaSetDevice(device_));
  ASSIGN_OR_RETURN(Input in, Stage(batch, /*force_staging=*/false));
  RETURN_IF_ERROR(EnqueueForward(in, /*train=*/false));
  RETURN_IF_ERROR(ReadScalars());
  const bool bad_label = host_scalars_->bad_label != 0;
  stats->loss_sum += host_scalars_->eval_loss_sum;
  stats->correct += static_cast<int64_t>(host_scalars_->eval_correct);
  stats->samples += in.B;
  cudaCheck(cudaMemsetAsync(&scalars_->eval_loss_sum, 0, sizeof(double), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->eval_correct, 0, sizeof(unsigned long long), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->bad_label, 0, sizeof(int), stream_));
  if (bad_label) {
    return absl::InvalidArgumentError(
        absl::StrCat("an evaluation label was outside [0, ", width(L()), ")"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  cudaCheck(cudaSetDevice(device_));
  return WaitStream(stream_);
}

absl::Status CudaBackend::RefreshLowPrecisionWeights() {
  if (!low_precision()) return absl::OkStatus();
  return cuda_internal::LaunchCast(params_, num_params_, params_lp_, lp_, stream_);
}

absl::StatusOr<ModelState> CudaBackend::SaveState() {
  cudaCheck(cudaSetDevice(device_));
  RETURN_IF_ERROR(ReadScalars());
  ModelState out = layout_;
  out.optimizer_steps = host_scalars_->optimizer_steps;
  for (size_t i = 0; i < out.params.size(); ++i) {
    HostTensor& t = out.params[i];
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.values.resize(n);
    cudaCheck(cudaMemcpy(t.values.data(), params_ + offsets_[i], n * sizeof(float),
                         cudaMemcpyDeviceToHost));
  }
  const size_t np = out.params.size();
  for (size_t j = 0; j < out.opt_state.size(); ++j) {
    const size_t slot = j / np, p = j % np;
    HostTensor& t = out.opt_state[j];
    t.values.resize(out.params[p].values.size());
    cudaCheck(cudaMemcpy(t.values.data(), slots_ + slot * num_params_ + offsets_[p],
                         t.values.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return out;
}

absl::Status CudaBackend::LoadState(const ModelState& state) {
  if (state.model.layers != layout_.model.layers) {
    return absl::InvalidArgumentError("LoadState: the state's layers differ from the model's");
  }
  if (state.params.size() != layout_.params.size() ||
      state.opt_state.size() != layout_.opt_state.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadState: expected ", layout_.params.size(), " parameter and ",
        layout_.opt_state.size(), " optimizer-state tensors, got ", state.params.size(), " and ",
        state.opt_state.size()));
  }
  const size_t np = layout_.params.size();
  auto expected = [&](size_t p) {
    return p + 1 < np ? offsets_[p + 1] - offsets_[p] : num_params_ - offsets_[p];
  };
  for (size_t i = 0; i < np; ++i) {
    if (state.params[i].shape != layout_.params[i].shape ||
        static_cast<int64_t>(state.params[i].values.size()) != expected(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadState: tensor ", state.params[i].name, " has the wrong shape"));
    }
  }
  for (size_t j = 0; j < state.opt_state.size(); ++j) {
    if (static_cast<int64_t>(state.opt_state[j].values.size()) != expected(j % np)) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadState: tensor ", state.opt_state[j].name, " has the wrong size"));
    }
  }
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamSynchronize(stream_));  // nothing in flight may read what we overwrite
  for (size_t i = 0; i < np; ++i) {
    cudaCheck(cudaMemcpy(params_ + offsets_[i], state.params[i].values.data(),
                         expected(i) * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (size_t j = 0; j < state.opt_state.size(); ++j) {
    cudaCheck(cudaMemcpy(slots_ + (j / np) * num_params_ + offsets_[j % np],
                         state.opt_state[j].values.data(), expected(j % np) * sizeof(float),
                         cudaMemcpyHostToDevice));
  }
  long long steps = state.optimizer_steps;
  cudaCheck(cudaMemcpy(&scalars_->optimizer_steps, &steps, sizeof(steps),
                       cudaMemcpyHostToDevice));
  RETURN_IF_ERROR(RefreshLowPrecisionWeights());
  cudaCheck(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelState& state,
                                                           const OptimizerConfig& opt,
                                                           const BackendOptions& options,
                                                           const CudaBackendOptions& cuda) {
  RETURN_IF_ERROR(device::CudaDeviceStatus(cuda.ordinal));
  RETURN_IF_ERROR(cuda_internal::LoadCublasLt());
  if (options.max_batch < 1) return absl::InvalidArgumentError("max_batch must be >= 1");
  if (state.model.num_linear() < 1) {
    return absl::InvalidArgumentError("the model needs at least two layer sizes");
  }
  if (state.params.size() != 2u * state.model.num_linear() ||
      state.opt_state.size() != state.params.size() * opt.state_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateCudaBackend: state holds ", state.params.size(), " parameter and ",
        state.opt_state.size(), " optimizer-state tensors; the model and optimizer need ",
        2 * state.model.num_linear(), " and ", 2 * state.model.num_linear() * opt.state_slots()));
  }
  auto backend = std::make_unique<CudaBackend>(state, opt, options, cuda);
  RETURN_IF_ERROR(backend->Init(state));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace sluice
