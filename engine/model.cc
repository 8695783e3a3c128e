#include "engine/model.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/enum_names.h"
#include "common/printable.h"

namespace sluice {

int64_t ModelConfig::num_parameters() const {
  int64_t total = 0;
  for (int k = 0; k + 1 < static_cast<int>(layers.size()); ++k) {
    total += int64_t{layers[k]} * layers[k + 1] + layers[k + 1];
  }
  return total;
}

namespace {

// One size of a --layers list (`text`), in [1, kMaxLayerSize].
absl::StatusOr<int> ParseLayerSize(absl::string_view part, absl::string_view text) {
  absl::string_view number = absl::StripAsciiWhitespace(part);
  absl::ConsumePrefix(&number, "+");
  const bool digits = !number.empty() && number.find_first_not_of("0123456789") == number.npos;
  uint64_t size = 0;
  const bool fits = absl::SimpleAtoi(number, &size);  // false only on overflow, for digits
  if (!digits || (fits && size == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", Printable(part), "' in '", Printable(text),
                     "' is not a positive integer (e.g. 784,128,10)"));
  }
  if (!fits || size > kMaxLayerSize) {
    return absl::InvalidArgumentError(absl::StrCat("'", Printable(part), "' in '", Printable(text),
                                                   "' is above the maximum layer size ",
                                                   kMaxLayerSize));
  }
  return static_cast<int>(size);
}

}  // namespace

absl::StatusOr<ModelConfig> ParseLayers(absl::string_view text) {
  ModelConfig config;
  config.layers.clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<int> size = ParseLayerSize(part, text);
    if (!size.ok()) return size.status();
    config.layers.push_back(*size);
  }
  if (config.layers.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", Printable(text), "' needs at least two sizes (inputs,classes), e.g. 784,128,10"));
  }
  return config;
}

namespace {
constexpr auto kOptimizerKindNames =
    MakeEnumNames<OptimizerKind>({{OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdamW, "adamw"}});
constexpr auto kLrScheduleNames = MakeEnumNames<LrSchedule>({{LrSchedule::kConstant, "constant"},
                                                             {LrSchedule::kStep, "step"},
                                                             {LrSchedule::kCosine, "cosine"}});

template <typename E, size_t N>
absl::StatusOr<E> ParseName(const EnumNames<E, N>& names, absl::string_view name) {
  if (std::optional<E> e = names.Parse(name)) return *e;
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", names.List(), ", got ", QuotedPrintable(name)));
}
}  // namespace

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  return ParseName(kOptimizerKindNames, name);
}

absl::StatusOr<LrSchedule> ParseLrSchedule(absl::string_view name) {
  return ParseName(kLrScheduleNames, name);
}

int OptimizerConfig::state_slots() const {
  if (kind == OptimizerKind::kAdamW) return 2;
  return momentum != 0.0f ? 1 : 0;
}

float LearningRateAt(const OptimizerConfig& config, int64_t step) {
  switch (config.schedule) {
    case LrSchedule::kConstant:
      return config.lr;
    case LrSchedule::kStep: {
      if (config.step_size <= 0) return config.lr;
      const int64_t drops = step / config.step_size;
      return static_cast<float>(config.lr * std::pow(static_cast<double>(config.gamma), drops));
    }
    case LrSchedule::kCosine: {
      if (step < config.warmup_steps) {
        return static_cast<float>(static_cast<double>(config.lr) * (step + 1) /
                                  config.warmup_steps);
      }
      const int64_t decay_steps = config.total_steps - config.warmup_steps;
      if (decay_steps <= 0) return config.lr;
      double progress = static_cast<double>(step - config.warmup_steps) / decay_steps;
      if (progress > 1.0) progress = 1.0;
      return static_cast<float>(0.5 * config.lr * (1.0 + std::cos(std::numbers::pi * progress)));
    }
  }
  return config.lr;
}

namespace {
// Maps 64 random bits to a float in [0, 1) from the top 24 bits, so the result does not depend
// on the standard library's (implementation-defined) uniform_real_distribution.
float UnitFloat(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }
}  // namespace

ModelState InitModelState(const ModelConfig& config, const OptimizerConfig& opt, uint64_t seed) {
  ModelState state;
  state.model = config;
  std::mt19937_64 rng(seed);
  for (int k = 0; k < config.num_linear(); ++k) {
    const int fan_in = config.layers[k];
    const int fan_out = config.layers[k + 1];
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    HostTensor weight{absl::StrCat(2 * k, ".weight"), {fan_out, fan_in}, {}};
    HostTensor bias{absl::StrCat(2 * k, ".bias"), {fan_out}, {}};
    weight.values.resize(int64_t{fan_out} * fan_in);
    bias.values.resize(fan_out);
    for (float& w : weight.values) w = bound * (2.0f * UnitFloat(rng()) - 1.0f);
    for (float& b : bias.values) b = bound * (2.0f * UnitFloat(rng()) - 1.0f);
    state.params.push_back(std::move(weight));
    state.params.push_back(std::move(bias));
  }
  const char* slot_names[2] = {opt.kind == OptimizerKind::kAdamW ? "exp_avg" : "momentum_buffer",
                               "exp_avg_sq"};
  for (int s = 0; s < opt.state_slots(); ++s) {
    for (const HostTensor& p : state.params) {
      state.opt_state.push_back(HostTensor{absl::StrCat(p.name, ".", slot_names[s]), p.shape,
                                           std::vector<float>(p.values.size(), 0.0f)});
    }
  }
  return state;
}

}  // namespace sluice
