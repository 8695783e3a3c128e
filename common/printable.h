// Printable: user-supplied text (file and class names, flag values, transform lists) made safe
// to echo in a one-line message (docs/limits.md, "Echoed input").
//
// - Control characters (C0, DEL, C1 in UTF-8: ESC, NUL, CR, LF, ...) and bytes that are not
//   valid UTF-8 become \xNN escapes, and a backslash becomes "\\", so an ANSI escape in a file
//   name reaches the terminal as text, a NUL cannot cut the message, and a UTF-8 byte-order
//   mark (U+FEFF) is shown as "\u{feff}" instead of an invisible character.
// - Text longer than `max_chars` bytes is cut at a character boundary after about `max_chars`
//   bytes and followed by "... (N bytes)", so a 10 MB argument is echoed as 200 characters.
// Thread safety: pure functions.
#ifndef SLUICE_COMMON_PRINTABLE_H_
#define SLUICE_COMMON_PRINTABLE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

inline constexpr size_t kMaxEchoChars = 200;

// `text` escaped and bounded as above.
std::string Printable(absl::string_view text, size_t max_chars = kMaxEchoChars);

// Printable(text) in double quotes: "\"<escaped>\"".
std::string QuotedPrintable(absl::string_view text, size_t max_chars = kMaxEchoChars);

}  // namespace sluice

#endif  // SLUICE_COMMON_PRINTABLE_H_
