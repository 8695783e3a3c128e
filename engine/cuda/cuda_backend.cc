// The CUDA backend. Why things are the way they are:
// - All parameters live in ONE flat f32 buffer (gradients and optimizer slots likewise), laid
//   out in ModelState order: the optimizer is then a single launch over every tensor, and
//   SaveState/LoadState are one copy each way.
// - lr, the fp16 loss scale and the optimizer step count live on the device (StepScalars), so
//   a captured CUDA Graph is reusable across steps; lr is written by a kernel before launch.
// - The graph reads the batch from fixed staging buffers, so with cuda_graph on a device batch
//   is first copied (device to device, ~100 KB) into them; without graphs it is read in place.
//
// This file holds CudaBackend's construction and Init from the BackendOptions (device, memory,
// cuBLASLt, the exchange's communicator), the batch check, TrainStep and the kernels a step
// enqueues (forward, backward, optimizer), and CreateCudaBackend. The class is declared in
// internal/cuda_backend_impl.h; staging, graph capture, loss readback and evaluation are in
// internal/cuda_backend_step.cc, the NCCL exchange in internal/cuda_backend_exchange.cc, the
// checkpoint state in internal/cuda_backend_state.cc.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "device/cuda/cuda_device.h"
#include "device/device.h"
#include "engine/backend.h"
#include "engine/cuda/cublaslt_loader.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/internal/cuda_backend_impl.h"

namespace sluice {
namespace cuda_internal {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;  // cuBLASLt's recommendation for Hopper
constexpr float kInitialFp16LossScale = 65536.0f;  // as torch.cuda.amp.GradScaler

DType OperandType(Precision p) {
  switch (p) {
    case Precision::kBF16:
      return DType::kBF16;
    case Precision::kF16:
      return DType::kF16;
    default:
      return DType::kF32;
  }
}

}  // namespace

CudaBackend::CudaBackend(const ModelState& state, const OptimizerConfig& opt,
                         const BackendOptions& options, const CudaBackendOptions& cuda)
    : layout_(state),
      opt_(opt),
      options_(options),
      cuda_(cuda),
      lp_(OperandType(options.precision)) {}

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
    ASSIGN_OR_RETURN(
        dy_lp_, alloc_.Allocate(MemoryTag::kWorkspace, int64_t{B} * max_width * DTypeSize(lp_)));
  }
  ASSIGN_OR_RETURN(scalars_, alloc_.AllocateArray<StepScalars>(MemoryTag::kWorkspace, 1));
  ASSIGN_OR_RETURN(void* ws, alloc_.Allocate(MemoryTag::kWorkspace, kGemmWorkspaceBytes));
  ASSIGN_OR_RETURN(gemm_, LinearGemm::Create(lp_, ws, kGemmWorkspaceBytes));

  StepScalars init{};
  init.loss_scale = options_.precision == Precision::kF16 ? kInitialFp16LossScale : 1.0f;
  init.lr = opt_.lr;
  *host_scalars_ = init;
  cudaCheck(cudaMemcpyAsync(scalars_, host_scalars_, sizeof(StepScalars), cudaMemcpyHostToDevice,
                            stream_));
  RETURN_IF_ERROR(LoadState(state));
  RETURN_IF_ERROR(InitExchange());
  for (HostTensor& t : layout_.params) t.values = {};
  for (HostTensor& t : layout_.opt_state) t.values = {};
  return absl::OkStatus();
}

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

bool CudaBackend::exchanging() const {
  return options_.gradient_comm != nullptr &&
         (options_.gradient_comm->is_distributed() || options_.exchange_in_world_of_one);
}

absl::Status CudaBackend::CheckBatch(const BatchView& b) const {
  if (b.samples == nullptr || b.labels == nullptr) {
    return absl::InvalidArgumentError("batch has no samples or labels");
  }
  if (b.sample.values() != static_cast<size_t>(width(0))) {
    return absl::InvalidArgumentError(absl::StrCat("batch samples are ", SampleSpecString(b.sample),
                                                   " (", b.sample.values(),
                                                   " values), the model takes ", width(0)));
  }
  // A data-parallel rank's share of a step may be empty; it still joins the exchange.
  const int min_size = exchanging() ? 0 : 1;
  if (static_cast<int>(b.size) < min_size || static_cast<int>(b.size) > options_.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", b.size, " outside [", min_size,
                                                   ", ", options_.max_batch, "] (max_batch)"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueForward(const Input& in, bool train) {
  NvtxRange range(train ? "Forward" : "EvalForward");
  const void* x = in.samples;
  if (in.format != H2DFormat::kF32 || low_precision()) {
    RETURN_IF_ERROR(cuda_internal::LaunchConvertInput(
        in.samples, in.format, int64_t{in.B} * width(0), in.norm, x_, lp_, stream_));
    x = x_;
  }
  for (int l = 0; l < L(); ++l) {
    const bool hidden = l + 1 < L();
    const void* input = l == 0 ? x : (low_precision() ? act_lp_[l - 1] : act_[l - 1]);
    RETURN_IF_ERROR(gemm_->Forward(input, weight_operand(l), params_ + offsets_[2 * l + 1], in.B,
                                   width(l), width(l + 1), hidden, act_[l], stream_));
    if (hidden && low_precision()) {
      RETURN_IF_ERROR(cuda_internal::LaunchCast(act_[l], int64_t{in.B} * width(l + 1), act_lp_[l],
                                                lp_, stream_));
    }
  }
  const int C = width(L());
  return cuda_internal::LaunchSoftmaxCrossEntropy(
      act_[L() - 1], in.labels, in.B, C, train ? &scalars_->loss_scale : nullptr,
      train ? dact_[L() - 1] : nullptr,
      train ? &scalars_->train_loss_sum : &scalars_->eval_loss_sum,
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
    RETURN_IF_ERROR(cuda_internal::LaunchBiasGrad(dy, B, O, grads_ + offsets_[2 * l + 1], stream_));
    RETURN_IF_ERROR(gemm_->BackwardWeights(x, dy_op, B, I, O, grads_ + offsets_[2 * l], stream_));
    RETURN_IF_ERROR(ExchangeLayer(l));  // overlaps the layers below
    if (l > 0) {
      RETURN_IF_ERROR(
          gemm_->BackwardInput(dy_op, weight_operand(l), B, I, O, dact_[l - 1], stream_));
      RETURN_IF_ERROR(
          cuda_internal::LaunchReluBackward(act_[l - 1], int64_t{B} * I, dact_[l - 1], stream_));
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

}  // namespace cuda_internal

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
  auto backend = std::make_unique<cuda_internal::CudaBackend>(state, opt, options, cuda);
  RETURN_IF_ERROR(backend->Init(state));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace sluice
