#include "common/text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {
namespace {

// The length of the valid UTF-8 sequence at `s[i]` (RFC 3629: no overlongs, no surrogates, at
// most U+10FFFF), or 0 if there is none; its code point in *cp.
size_t Utf8Length(std::string_view s, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  char32_t v = n == 1 ? c : c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

bool IsControl(char32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

}  // namespace

std::string TextProblem(std::string_view text, bool multiline) {
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const size_t n = Utf8Length(text, i, &cp);
    if (n == 0) return absl::StrCat("has invalid UTF-8 at byte ", i);
    if (IsControl(cp) && !(multiline && (cp == '\n' || cp == '\t'))) {
      return absl::StrFormat("has a control character (0x%02x) at byte %d",
                             static_cast<unsigned>(cp), i);
    }
    i += n;
  }
  return "";
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const size_t n = Utf8Length(text, i, &cp);
    if (n == 0 || cp == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string FieldName(std::string_view key) {
  return key.empty() ? std::string("\"\"") : Printable(key, 64);
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t end = std::min(text.size(), max_bytes);
  for (size_t i = 0; i < end;) {
    char32_t cp = 0;
    const size_t n = Utf8Length(text, i, &cp);
    if (n > 0 && !IsControl(cp) && cp != '\\') {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
    ++i;
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

std::string TerminalText::Feed(std::string_view piece) {
  const std::string text = held_ + std::string(piece);
  held_.clear();
  return Render(text, /*at_end=*/false);
}

std::string TerminalText::Finish() {
  const std::string text = std::move(held_);
  held_.clear();
  return Render(text, /*at_end=*/true);
}

std::string TerminalText::Render(std::string_view text, bool at_end) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      char32_t cp = 0;
      const size_t n = Utf8Length(text, i, &cp);
      if (n == 0) {
        // A lead byte whose sequence the next piece may finish.
        const size_t want = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool prefix = !at_end && want > 0 && i + want > text.size();
        for (size_t k = i + 1; prefix && k < text.size(); ++k) {
          prefix = (static_cast<unsigned char>(text[k]) & 0xc0) == 0x80;
        }
        if (prefix) {
          held_ = std::string(text.substr(i));
          break;
        }
        absl::StrAppendFormat(&out, "\\x%02x", c);
        ++i;
      } else {
        if (IsControl(cp)) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned>(cp));
        } else {
          out.append(text.substr(i, n));
        }
        i += n;
      }
      continue;
    }
    if (c == '\r') {
      if (i + 1 == text.size() && !at_end) {
        held_ = "\r";
        break;
      }
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        out += "\r\n";
        i += 2;
        continue;
      }
      out += "^M";
    } else if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
    } else {
      out += '^';
      out += c == 0x7f ? '?' : static_cast<char>(c + 0x40);
    }
    ++i;
  }
  return out;
}

std::string FormatMib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace weft
