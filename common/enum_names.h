// EnumNames: the one table of an enum's names, from which its Name and Parse functions and the
// "a, b or c" list of error messages are derived, so no name is written twice.
//
//   constexpr auto kH2DFormatNames = MakeEnumNames<H2DFormat>(
//       {{H2DFormat::kU8, "u8"}, {H2DFormat::kF16, "f16"}, {H2DFormat::kF32, "f32"}});
//   kH2DFormatNames.Name(H2DFormat::kF16)   // "f16"
//   kH2DFormatNames.Parse("u8")             // H2DFormat::kU8; std::nullopt if unknown
//   kH2DFormatNames.List()                  // "u8, f16 or f32"
//
// A value may have several entries (aliases, e.g. "fp32" and "f32"): Name gives its first,
// Parse accepts each, List shows only the first. Lookups are linear (tables are small).
// Thread safety: immutable values.
#ifndef SLUICE_COMMON_ENUM_NAMES_H_
#define SLUICE_COMMON_ENUM_NAMES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace sluice {

template <typename E, size_t N>
struct EnumNames {
  std::array<std::pair<E, absl::string_view>, N> entries;

  // The first name of `e`; "?" for a value that has no entry.
  constexpr absl::string_view Name(E e) const {
    for (const auto& [value, name] : entries) {
      if (value == e) return name;
    }
    return "?";
  }

  std::optional<E> Parse(absl::string_view name) const {
    for (const auto& [value, n] : entries) {
      if (n == name) return value;
    }
    return std::nullopt;
  }

  // Each value's first name in table order, separated by ", " and `last` before the final one:
  // List() == "u8, f16 or f32"; List(", ") == "u8, f16, f32".
  std::string List(absl::string_view last = " or ") const {
    std::string out;
    size_t shown = 0;
    size_t total = 0;
    for (size_t i = 0; i < N; ++i) total += IsFirst(i) ? 1 : 0;
    for (size_t i = 0; i < N; ++i) {
      if (!IsFirst(i)) continue;
      if (shown > 0) {
        const absl::string_view sep = shown + 1 == total ? last : absl::string_view(", ");
        out.append(sep.data(), sep.size());
      }
      out.append(entries[i].second.data(), entries[i].second.size());
      ++shown;
    }
    return out;
  }

 private:
  // Whether entry i is the first entry of its value (not an alias).
  constexpr bool IsFirst(size_t i) const {
    for (size_t k = 0; k < i; ++k) {
      if (entries[k].first == entries[i].first) return false;
    }
    return true;
  }
};

// Builds an EnumNames from a braced list, the size deduced: MakeEnumNames<E>({{E::kA, "a"}}).
template <typename E, size_t N>
constexpr EnumNames<E, N> MakeEnumNames(const std::pair<E, absl::string_view> (&entries)[N]) {
  EnumNames<E, N> names{};
  for (size_t i = 0; i < N; ++i) names.entries[i] = entries[i];
  return names;
}

}  // namespace sluice

#endif  // SLUICE_COMMON_ENUM_NAMES_H_
