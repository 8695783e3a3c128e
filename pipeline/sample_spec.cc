#include "pipeline/sample_spec.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace sluice {

namespace {
constexpr auto kElementTypeNames = MakeEnumNames<ElementType>({{ElementType::kU8, "u8"},
                                                               {ElementType::kF16, "f16"},
                                                               {ElementType::kBF16, "bf16"},
                                                               {ElementType::kF32, "f32"}});
constexpr auto kLayoutNames =
    MakeEnumNames<SampleLayout>({{SampleLayout::kCHW, "CHW"}, {SampleLayout::kHWC, "HWC"}});
}  // namespace

absl::string_view ElementTypeName(ElementType t) { return kElementTypeNames.Name(t); }

absl::StatusOr<ElementType> ParseElementType(absl::string_view name) {
  if (std::optional<ElementType> t = kElementTypeNames.Parse(name)) return *t;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown element type '", name, "' (expected ", kElementTypeNames.List(), ")"));
}

absl::string_view SampleLayoutName(SampleLayout l) { return kLayoutNames.Name(l); }

std::string SampleSpecString(const SampleSpec& s) {
  // ", N pixels" only where the area bound is tighter than the box.
  const std::string area = s.plane_values() < size_t{s.height} * s.width
                               ? absl::StrCat(", ", s.plane_values(), " pixels")
                               : std::string();
  if (s.extent == SampleExtent::kEncoded) {
    return absl::StrCat("encoded images (at most ", s.height, "x", s.width, area, ")");
  }
  if (s.extent == SampleExtent::kVariable) {
    return absl::StrCat(ElementTypeName(s.dtype), " ", s.channels, "xHxW ",
                        SampleLayoutName(s.layout), " (sizes vary, at most ", s.height, "x",
                        s.width, area, ")");
  }
  return absl::StrCat(ElementTypeName(s.dtype), " ", s.channels, "x", s.height, "x", s.width, " ",
                      SampleLayoutName(s.layout));
}

SampleSpec StoredSampleSpec(const RecordSpec& r) {
  SampleSpec s;
  s.dtype = r.sample_dtype == SampleDType::kU8 ? ElementType::kU8 : ElementType::kF32;
  s.channels = r.channels;
  s.height = r.height;
  s.width = r.width;
  s.layout = SampleLayout::kHWC;
  return s;
}

}  // namespace sluice
