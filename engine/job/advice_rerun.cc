#include "engine/job/advice_rerun.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace sluice {

nlohmann::ordered_json AdviceCheckJson(const AdviceCheck& check, Consumer consumer, int64_t steps) {
  return {{"setting", AdviceFlag(check.advice.setting)},
          {"value", check.advice.value},
          {"text", AdviceText(check.advice, consumer)},
          {"note", check.note},
          {"before_samples_per_s", check.before_samples_per_s},
          {"after_samples_per_s", check.after_samples_per_s},
          {"speedup", check.speedup()},
          {"predicted_speedup", check.advice.predicted_speedup},
          {"steps", steps}};
}

absl::StatusOr<std::vector<AdviceCheck>> RerunAdvice(const std::vector<Advice>& advice, int rounds,
                                                     const AdviceNotRun& not_run,
                                                     const AdviceSpan& span) {
  std::vector<AdviceCheck> checks;
  for (const Advice& a : advice) {
    AdviceCheck check;
    check.advice = a;
    check.note = not_run(a);
    for (int round = 0; check.note.empty() && round < std::max(1, rounds); ++round) {
      ASSIGN_OR_RETURN(const double before, span(nullptr, round));
      ASSIGN_OR_RETURN(const double after, span(&a, round));
      check.before_samples_per_s = std::max(check.before_samples_per_s, before);
      check.after_samples_per_s = std::max(check.after_samples_per_s, after);
    }
    checks.push_back(check);
  }
  return checks;
}

std::string AdviceChecksText(const std::vector<AdviceCheck>& checks, Consumer consumer,
                             int64_t steps, int rounds) {
  const bool loader = consumer == Consumer::kPython;
  if (checks.empty()) {
    return absl::StrCat("\ncheck-advice: the report suggests no change of ",
                        loader ? "an argument" : "a setting", "\n");
  }
  const bool any_run = std::any_of(checks.begin(), checks.end(),
                                   [](const AdviceCheck& c) { return c.note.empty(); });
  std::string out = !any_run ? "\ncheck-advice (no entry is a change a rerun can make):\n"
                    : loader
                        ? absl::StrFormat(
                              "\ncheck-advice (each change against the loader as it was, %d "
                              "batches with your step as a sleep, the better of %d runs each):\n",
                              steps, rounds)
                        : absl::StrFormat(
                              "\ncheck-advice (each change against the run as it was, %d steps, "
                              "the better of %d runs each):\n",
                              steps, rounds);
  for (const AdviceCheck& c : checks) {
    const std::string text = AdviceText(c.advice, consumer);
    if (!c.note.empty()) {
      absl::StrAppendFormat(&out, "  %-28s not run: %s\n", text, c.note);
      continue;
    }
    // Thousands with one decimal from 10 k up; below, whole samples (0.2 k and 0.3 k read as
    // 1.5x next to a measured 1.84x).
    const auto rate = [](double r) {
      return r >= 1e4 ? absl::StrFormat("%8.1f k", r / 1e3) : absl::StrFormat("%10.0f", r);
    };
    absl::StrAppendFormat(
        &out, "  %-28s before %s  after %s samples/s  %.2fx%s\n", text,
        rate(c.before_samples_per_s), rate(c.after_samples_per_s), c.speedup(),
        c.speedup() >= 1.1 ? "" : "  (less than 1.1x: this advice did not pay here)");
  }
  return out;
}

std::string LoaderRerunNote(AdviceSetting setting) {
  switch (setting) {
    case AdviceSetting::kReadAhead:
    case AdviceSetting::kReadConcurrency:
    case AdviceSetting::kDecompressThreads:
    case AdviceSetting::kPreprocessThreads:
    case AdviceSetting::kPoolSize:
    case AdviceSetting::kDeviceRingDepth:
      return "";
    case AdviceSetting::kH2DFormat:
      return "dtype changes what your step receives (it must normalize on the device): a rerun "
             "without your step cannot measure it";
    case AdviceSetting::kCudaGraph:
      return "a setting of sluice-train's CUDA backend, not of the loader";
    case AdviceSetting::kBatchSize:
      return "batch_size changes what your step receives (twice the samples per step): a rerun "
             "with your step as a sleep of its old length cannot measure it";
    case AdviceSetting::kZstdLevel:
    case AdviceSetting::kImageSide:
      return "a change to the dataset (sluice-shard create), not to the loader";
  }
  return "not a Loader argument";
}

absl::StatusOr<LoaderChange> LoaderRerunChange(const Advice& advice) {
  if (std::string note = LoaderRerunNote(advice.setting); !note.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(AdviceFlag(advice.setting), ": ", note));
  }
  LoaderChange change;
  change.argument = AdviceLoaderArgument(advice.setting);
  if (!absl::SimpleAtoi(advice.value, &change.value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("advice ", change.argument, ": not an int: '", advice.value, "'"));
  }
  return change;
}

double LoaderStepSeconds(int64_t compute_busy_ns, uint64_t steps) {
  // In this order, as Python's busy_ns / 1e9 / steps: a test compares the two exactly.
  return steps > 0 ? static_cast<double>(compute_busy_ns) / 1e9 / static_cast<double>(steps) : 0.0;
}

}  // namespace sluice
