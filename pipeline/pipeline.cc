#include "pipeline/pipeline.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "pipeline/internal/order_planner.h"
#include "pipeline/internal/pipeline_core.h"

namespace sluice {

uint32_t AutoPoolSize(uint64_t batch_samples, uint64_t buffer_bytes, uint64_t steps_per_epoch,
                      int preprocess_threads, uint64_t epochs) {
  const uint64_t by_samples =
      (kAutoPoolSamples + batch_samples - 1) / std::max<uint64_t>(1, batch_samples);
  const uint64_t by_bytes = kAutoPoolBytes / std::max<uint64_t>(1, buffer_bytes);
  uint64_t pool = std::clamp<uint64_t>(std::min(by_samples, by_bytes), 4, 256);
  if (steps_per_epoch > 0) {
    const uint64_t by_epoch =
        epochs <= 1 ? steps_per_epoch
                    : (steps_per_epoch + kAutoPoolEpochFraction - 1) / kAutoPoolEpochFraction;
    pool = std::min(pool,
                    std::max<uint64_t>(
                        {4, 2 * static_cast<uint64_t>(std::max(0, preprocess_threads)), by_epoch}));
  }
  return static_cast<uint32_t>(pool);
}

namespace {
constexpr auto kOnCorruptNames =
    MakeEnumNames<OnCorrupt>({{OnCorrupt::kFail, "fail"}, {OnCorrupt::kSkip, "skip"}});
}  // namespace

absl::StatusOr<OnCorrupt> ParseOnCorrupt(absl::string_view name) {
  if (std::optional<OnCorrupt> c = kOnCorruptNames.Parse(name)) return *c;
  return absl::InvalidArgumentError(absl::StrCat("unknown --on-corrupt '", Printable(name),
                                                 "' (expected ", kOnCorruptNames.List(), ")"));
}

uint64_t StepsPerEpoch(uint64_t records, const OrderSpec& order) {
  pipeline_internal::OrderOptions o;
  o.batch_size = order.batch_size;
  o.drop_last = order.drop_last;
  return pipeline_internal::StepsPerEpoch(records, o);
}

BatchLease& BatchLease::operator=(BatchLease&& o) noexcept {
  if (this != &o) {
    Release();
    core_ = std::move(o.core_);
    id_ = o.id_;
    handed_out_ns_ = o.handed_out_ns_;
    view_ = o.view_;
    o.core_ = nullptr;
    o.view_ = BatchView{};
  }
  return *this;
}

void BatchLease::Release(device::Stream* stream) {
  if (core_ == nullptr) return;
  std::shared_ptr<pipeline_internal::PipelineCore> core = std::move(core_);
  core_ = nullptr;
  view_ = BatchView{};
  core->ReleaseLease(id_, stream, handed_out_ns_);
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const Dataset* dataset,
                                                           const PipelineOptions& options) {
  if (dataset == nullptr) return absl::InvalidArgumentError("Pipeline::Create: null dataset");
  auto core = std::make_shared<pipeline_internal::PipelineCore>(dataset, options);
  RETURN_IF_ERROR(core->Init());
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(core)));
}

Pipeline::~Pipeline() { core_->Shutdown(); }

absl::StatusOr<bool> Pipeline::Next(BatchLease* lease) { return core_->Next(lease); }

absl::StatusOr<bool> Pipeline::NextFor(BatchLease* lease, absl::Duration timeout) {
  return core_->Next(lease, std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout));
}
void Pipeline::Cancel() { core_->Cancel(); }
PipelineStats Pipeline::Stats() const { return core_->Stats(); }
void Pipeline::SetConsumerInSpan(bool in_span) { core_->SetConsumerInSpan(in_span); }
std::vector<TraceSpan> Pipeline::Trace() const { return core_->Trace(); }
uint64_t Pipeline::steps_per_epoch() const { return core_->steps_per_epoch(); }
uint64_t Pipeline::total_batches() const { return core_->total_batches(); }
bool Pipeline::uploads_to_device() const { return core_->uploads_to_device(); }
bool Pipeline::built_all() const { return core_->built_all(); }
const PipelineOptions& Pipeline::options() const { return core_->options(); }

}  // namespace sluice
