#include "engine/job/corrupt_fraction.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

// `records`: which records were read, in the consumer's words; `limit_name`: its setting.
absl::Status CheckCorruptFraction(const CorruptCounts& c, std::string_view records,
                                  std::string_view limit_name, double limit) {
  if (c.skipped == 0) return absl::OkStatus();
  const double fraction = static_cast<double>(c.skipped) / static_cast<double>(c.skipped + c.read);
  if (fraction <= limit) return absl::OkStatus();
  const bool named = c.messages != nullptr && !c.messages->empty();
  return absl::DataLossError(absl::StrFormat(
      "%s: %d of %d records %s were skipped as corrupt (%.4g), above %s=%g; first: %s", c.manifest,
      c.skipped, c.skipped + c.read, records, fraction, limit_name, limit,
      named ? c.messages->front() : std::string("(no message)")));
}

}  // namespace

absl::Status CheckSplitCorruptFraction(std::string_view split, const CorruptCounts& counts,
                                       double limit) {
  return CheckCorruptFraction(counts,
                              absl::StrCat("of the ", std::string(split), " split read so far"),
                              "--max-corrupt-fraction", limit);
}

absl::Status CheckPassCorruptFraction(uint64_t epoch, const CorruptCounts& counts, double limit) {
  return CheckCorruptFraction(counts, absl::StrCat("read in epoch ", epoch), "max_corrupt_fraction",
                              limit);
}

}  // namespace sluice
