#include "report/stages.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/printable.h"

namespace sluice {
namespace {

// Every row's property is true: ParseStage's and the list of all names.
constexpr bool StageInfo::*kAnyStage = nullptr;

bool Has(const StageInfo& info, bool StageInfo::*property) {
  return property == kAnyStage || info.*property;
}

}  // namespace

absl::string_view StageName(Stage s) {
  for (const StageInfo& info : kStageTable) {
    if (info.stage == s) return info.name;
  }
  return "unknown";
}

absl::StatusOr<Stage> ParseStage(absl::string_view name) { return ParseStageWith(name, kAnyStage); }

absl::StatusOr<Stage> ParseStageWith(absl::string_view name, bool StageInfo::*property) {
  for (const StageInfo& info : kStageTable) {
    if (Has(info, property) && name == info.name) return info.stage;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown stage '", Printable(name), "' (", StageNamesWith(property, ", "), ")"));
}

std::string StageNamesWith(bool StageInfo::*property, absl::string_view separator) {
  std::string out;
  for (const StageInfo& info : kStageTable) {
    if (Has(info, property)) absl::StrAppend(&out, out.empty() ? "" : separator, info.name);
  }
  return out;
}

}  // namespace sluice
