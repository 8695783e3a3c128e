// RandomGrayscale: torchvision.transforms.RandomGrayscale(p=0.1) (0.14) on one CHW sample:
// with probability p (a uniform draw u in [0, 1) below p) Grayscale's conversion (grayscale.h:
// tensor semantics, or PIL's with pil=True) to as many channels as the input has, as
// torchvision's; otherwise the sample unchanged. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_GRAYSCALE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_GRAYSCALE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomGrayscale final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomGrayscale";
  static constexpr absl::string_view kParams[] = {"p", "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // evaluation keeps the colours
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

 private:
  RandomGrayscale(double p, bool pil) : p_(p), pil_(pil) {}
  double p_;
  bool pil_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_GRAYSCALE_H_
