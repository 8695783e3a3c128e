#include "pipeline/transforms/grayscale.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/luma.h"

namespace sluice {
using transforms_internal::GreyOutputChannels;

absl::StatusOr<std::unique_ptr<Transform>> Grayscale::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const int64_t channels, args.Int("num_output_channels", 1));
  if (channels != 1 && channels != 3) return args.Wrong("num_output_channels", "1 or 3");
  ASSIGN_OR_RETURN(const bool pil, args.Bool("pil", false));
  return std::unique_ptr<Transform>(new Grayscale(static_cast<uint32_t>(channels), pil));
}

std::string Grayscale::Identity() const {
  return absl::StrCat(kName, "(num_output_channels=", channels_, ", pil=", pil_ ? "True" : "False",
                      ")");
}

absl::StatusOr<SampleSpec> Grayscale::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckGreyInput(kName, in, pil_));
  SampleSpec out = in;
  out.channels = GreyOutputChannels(in, channels_, pil_);
  return out;
}

void Grayscale::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  transforms_internal::ToGrey(in, src, dst, GreyOutputChannels(in, channels_, pil_), pil_);
}

}  // namespace sluice
