// A bound on a JSON text's nesting, checked before nlohmann-json parses it: its parser recurses
// and allocates per level, and a 10 MB file of "[" cost 0.79 GB to refuse (60 MB under a memory
// limit ended in std::bad_alloc). Files sluice reads (manifests, the ceilings cache) nest a few
// levels; kMaxJsonNesting is far above any of them.
//
// Errors: kDataLoss naming `what` and the byte where the bound was passed.
// Thread safety: a pure function.
#ifndef SLUICE_COMMON_JSON_DEPTH_H_
#define SLUICE_COMMON_JSON_DEPTH_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sluice {

inline constexpr int kMaxJsonNesting = 64;

inline absl::Status CheckJsonNesting(absl::string_view text, absl::string_view what,
                                     int max_depth = kMaxJsonNesting) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::DataLossError(absl::StrCat(what, ": JSON nested deeper than ", max_depth,
                                                " levels at byte ", i,
                                                " (not a file sluice wrote)"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice

#endif  // SLUICE_COMMON_JSON_DEPTH_H_
