#include "common/printable.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t Utf8Length(absl::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  size_t n;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, v = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, v = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, v = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// Printable and TerminalSafe: they differ only in what a backslash becomes.
std::string Escape(absl::string_view text, size_t max_chars, bool escape_backslash) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (out.size() >= max_chars) {
      absl::StrAppend(&out, "... (", text.size(), " bytes)");
      return out;
    }
    uint32_t cp = 0;
    const size_t n = Utf8Length(text, i, &cp);
    if (n == 0) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<uint8_t>(text[i]));
      ++i;
      continue;
    }
    if (cp == '\\') {
      out += escape_backslash ? "\\\\" : "\\";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      // C0, DEL and C1 controls (ESC starts an ANSI sequence, CSI is U+009B).
      if (cp < 0x100) {
        absl::StrAppendFormat(&out, "\\x%02x", cp);
      } else {
        absl::StrAppendFormat(&out, "\\u{%x}", cp);
      }
    } else if (cp == 0xFEFF || cp == 0x200B || cp == 0x2028 || cp == 0x2029 ||
               (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069)) {
      // Invisible or direction-changing characters: a byte-order mark, a zero-width space,
      // line separators, bidirectional overrides (which reorder what follows on the line).
      absl::StrAppendFormat(&out, "\\u{%x}", cp);
    } else {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string Printable(absl::string_view text, size_t max_chars) {
  return Escape(text, max_chars, /*escape_backslash=*/true);
}

std::string TerminalSafe(absl::string_view message, size_t max_chars) {
  std::string out = Escape(message, SIZE_MAX, /*escape_backslash=*/false);
  if (out.size() <= max_chars) return out;
  // The head and the tail: a message ends with what is wrong ("File name too long").
  const auto boundary = [&out](size_t at) {  // not inside a UTF-8 sequence
    while (at > 0 && at < out.size() && (static_cast<uint8_t>(out[at]) & 0xC0) == 0x80) --at;
    return at;
  };
  const size_t head = boundary(max_chars / 2);
  const size_t tail = boundary(out.size() - max_chars / 4);
  return absl::StrCat(absl::string_view(out).substr(0, head), " ... (", message.size(),
                      " bytes) ... ", absl::string_view(out).substr(tail));
}

std::string QuotedPrintable(absl::string_view text, size_t max_chars) {
  return absl::StrCat("\"", Printable(text, max_chars), "\"");
}

}  // namespace sluice
