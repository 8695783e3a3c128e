#include "engine/job/resume.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

std::string FloatText(float v) { return absl::StrFormat("%.9g", v); }
// Per-channel values, comma-separated: one value reads as it always has.
std::string FloatsText(const std::vector<float>& v) {
  return absl::StrJoin(v, ",", [](std::string* out, float f) { out->append(FloatText(f)); });
}

// Where a checkpoint stands, for messages: "epoch 2 step 125 (4000 samples into the epoch,
// 12000 in total)".
std::string DescribePosition(const Checkpoint& c) {
  return absl::StrCat("epoch ", c.epoch + 1, " step ", c.step_in_epoch, " (", c.samples_in_epoch,
                      " samples into the epoch, ", c.samples_total, " in total, optimizer step ",
                      c.state.optimizer_steps, ")");
}

// The checkpoint --resume names ("auto": the checkpoint directory's, when there is one), checked
// to continue the same run: its identity must equal `identity`.
absl::StatusOr<std::optional<Checkpoint>> ReadResumeCheckpoint(Env* env,
                                                               const TrainJobOptions& options,
                                                               const KeyValues& identity) {
  std::string path = options.resume;
  if (path == "auto") {
    path = options.checkpoint_dir.empty() ? "" : CheckpointPath(options.checkpoint_dir);
    if (!path.empty() && !env->FileExists(path)) {
      // Listed in the directory but not there: a dangling or looping symlink. Starting afresh
      // would silently throw the run away.
      auto children = env->GetChildren(options.checkpoint_dir);
      if (children.ok() &&
          std::find(children->begin(), children->end(), BaseName(path)) != children->end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            path,
            ": --resume=auto: the checkpoint is listed but cannot be opened (a dangling "
            "or looping symlink?); fix or remove it"));
      }
      path.clear();
    }
  }
  if (path.empty()) return std::optional<Checkpoint>();
  ASSIGN_OR_RETURN(Checkpoint checkpoint, ReadCheckpoint(env, path));
  std::vector<std::string> differences = IdentityDifferences(checkpoint.identity, identity);
  if (!differences.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot resume: the checkpoint, at ", DescribePosition(checkpoint),
                     ", belongs to a run with other settings; ", absl::StrJoin(differences, "; "),
                     " (resume with the checkpoint's settings, or start a new run elsewhere)"));
  }
  if (checkpoint.state.model.layers != options.model.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the checkpoint's model does not match --layers"));
  }
  if (checkpoint.epoch >= options.epochs) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": nothing to train: the checkpoint is at ", DescribePosition(checkpoint),
        ", and --epochs is ", options.epochs, " (raise --epochs to continue the run)"));
  }
  return std::optional<Checkpoint>(std::move(checkpoint));
}

// Rank 0's result, broadcast as one message: a kind byte, then for kCheckpoint the encoded
// checkpoint (docs/formats/checkpoint.md), for kError the status code in decimal, ':', and the
// message; kNone has no payload.
enum class ResumeMessage : char { kNone = '0', kCheckpoint = '1', kError = '2' };

std::string ErrorMessage(const absl::Status& status) {
  return absl::StrCat(std::string(1, static_cast<char>(ResumeMessage::kError)),
                      static_cast<int>(status.code()), ":", status.message());
}

std::string EncodeResumeMessage(const absl::StatusOr<std::optional<Checkpoint>>& loaded) {
  if (!loaded.ok()) return ErrorMessage(loaded.status());
  if (!loaded->has_value()) return std::string(1, static_cast<char>(ResumeMessage::kNone));
  absl::StatusOr<std::string> encoded = EncodeCheckpoint(**loaded);
  if (!encoded.ok()) return ErrorMessage(encoded.status());
  return absl::StrCat(std::string(1, static_cast<char>(ResumeMessage::kCheckpoint)), *encoded);
}

absl::StatusOr<std::optional<Checkpoint>> DecodeResumeMessage(const std::string& message) {
  if (message.empty()) return absl::InternalError("resume: empty broadcast from rank 0");
  const absl::string_view payload = absl::string_view(message).substr(1);
  switch (static_cast<ResumeMessage>(message[0])) {
    case ResumeMessage::kNone:
      return std::optional<Checkpoint>();
    case ResumeMessage::kError: {
      const size_t colon = payload.find(':');
      int code = static_cast<int>(absl::StatusCode::kInternal);
      if (colon == absl::string_view::npos || !absl::SimpleAtoi(payload.substr(0, colon), &code)) {
        return absl::InternalError("resume: malformed error from rank 0");
      }
      return absl::Status(static_cast<absl::StatusCode>(code), payload.substr(colon + 1));
    }
    case ResumeMessage::kCheckpoint: {
      ASSIGN_OR_RETURN(Checkpoint checkpoint, DecodeCheckpoint(payload, "rank 0's checkpoint"));
      return std::optional<Checkpoint>(std::move(checkpoint));
    }
  }
  return absl::InternalError("resume: unknown message kind from rank 0");
}

}  // namespace

std::string CheckpointPath(const std::string& checkpoint_dir) {
  return JoinPath(checkpoint_dir, "checkpoint.sluice");
}

absl::StatusOr<std::optional<Checkpoint>> LoadResumeCheckpoint(Env* env,
                                                               const TrainJobOptions& options,
                                                               const KeyValues& identity) {
  dist::Communicator* comm = options.comm;
  if (comm == nullptr || !comm->is_distributed()) {
    return ReadResumeCheckpoint(env, options, identity);
  }
  std::string message;
  if (comm->rank() == 0)
    message = EncodeResumeMessage(ReadResumeCheckpoint(env, options, identity));
  uint64_t length = message.size();
  RETURN_IF_ERROR(comm->Broadcast(&length, sizeof(length), 0));
  message.resize(length);
  RETURN_IF_ERROR(comm->Broadcast(message.data(), length, 0));
  return DecodeResumeMessage(message);
}

KeyValues RunIdentity(const TrainJobOptions& o, const Dataset& train) {
  const OrderSpec& order = o.pipeline.order;
  const OptimizerConfig& opt = o.optimizer;
  KeyValues id = {
      {"data.manifest_xxh3", ChecksumToHex(Xxh3(train.manifest().ToJson()))},
      {"data.records", absl::StrCat(train.record_count())},
      {"batch_size", absl::StrCat(order.batch_size)},
      {"seed", absl::StrCat(order.seed)},
      {"shuffle", order.shuffle ? "1" : "0"},
      {"shuffle_window", absl::StrCat(order.shuffle_window_frames)},
      {"drop_last", order.drop_last ? "1" : "0"},
      {"normalize_mean", FloatsText(o.pipeline.format.normalization.mean)},
      {"normalize_std", FloatsText(o.pipeline.format.normalization.std)},
      {"model.layers", absl::StrJoin(o.model.layers, ",")},
      {"optimizer", opt.kind == OptimizerKind::kAdamW ? "adamw" : "sgd"},
      {"lr", FloatText(opt.lr)},
      {"weight_decay", FloatText(opt.weight_decay)},
  };
  // The chain's canonical text (so spellings of the same ops match); absent without one.
  if (!o.pipeline.format.transforms.empty()) {
    id.emplace_back("transforms", o.pipeline.format.transforms.identity());
  }
  if (opt.kind == OptimizerKind::kAdamW) {
    id.emplace_back("beta1", FloatText(opt.beta1));
    id.emplace_back("beta2", FloatText(opt.beta2));
    id.emplace_back("eps", FloatText(opt.eps));
  } else {
    id.emplace_back("momentum", FloatText(opt.momentum));
    id.emplace_back("nesterov", opt.nesterov ? "1" : "0");
  }
  return id;
}

}  // namespace sluice
