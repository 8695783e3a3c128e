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

inline constexpr size_t kMaxMessageChars = 4096;

// A whole message made safe for the terminal, the last guard before a tool prints an error:
// characters escaped as by Printable, but a backslash left as it is (the parts that quote user
// text went through Printable already, and are not escaped twice). Over `max_chars` bytes,
// about the first half and the last quarter are kept around "... (N bytes) ...": a message
// ends with what is wrong. A file name that a library put into a message unescaped cannot move
// the cursor or recolour the terminal, nor make a line of megabytes.
std::string TerminalSafe(absl::string_view message, size_t max_chars = kMaxMessageChars);

}  // namespace sluice

#endif  // SLUICE_COMMON_PRINTABLE_H_
