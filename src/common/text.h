// Untrusted text (manifests, request bodies, what learners report): checking that it is text,
// and echoing it safely into errors and logs, where a newline or an ANSI escape in a field must
// not forge a log line or colour a terminal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft {

// "" if `text` is valid UTF-8 without control characters (U+0000–U+001F, U+007F–U+009F; with
// `multiline`, tab and newline are allowed), else the first problem and where, e.g.
// "has invalid UTF-8 at byte 3" or "has a control character (0x1b) at byte 5".
std::string TextProblem(std::string_view text, bool multiline = false);

// `text` safe to echo: valid UTF-8 without control characters as it is, every other byte as
// \xNN (and \n, \t, \\ as such), cut after `max_bytes` bytes of input with "...".
std::string Printable(std::string_view text, size_t max_bytes = 200);

// `text` as valid UTF-8 without NUL bytes: every byte that starts no valid sequence, and every
// NUL, becomes U+FFFD; the rest is kept as it is. For stores that only hold UTF-8 text
// (PostgreSQL's TEXT), so what a learner reported is kept as readers would be shown it anyway.
std::string ValidUtf8(std::string_view text);

// `bytes` as "12.3 MiB" (mebibytes, one decimal), for errors and logs.
std::string FormatMib(int64_t bytes);

// A program's output made safe for a terminal, as `weft logs` shows it there. Printable UTF-8,
// newline, tab and "\r\n" pass as they are; every other control character is shown in caret
// notation (ESC as ^[, a lone carriage return as ^M, DEL as ^?), a C1 control (U+0080-U+009F)
// as \u0080, and a byte that starts no valid UTF-8 sequence as \xNN. So an escape sequence in a
// log (an OSC 52 clipboard write, a title change, a cursor move) is shown, not obeyed. Fed in
// pieces as a stream arrives: a sequence cut between two pieces is held for the next.
class TerminalText {
 public:
  // `piece` rendered, but for an unfinished UTF-8 sequence or carriage return at its end.
  std::string Feed(std::string_view piece);
  // What is still held at the end of the stream, rendered.
  std::string Finish();

 private:
  std::string Render(std::string_view text, bool at_end);
  std::string held_;
};

// A key of an untrusted document as a field name in a problem: Printable (at most 64 bytes), and
// `""` for the empty key, so no problem ever names an empty field.
std::string FieldName(std::string_view key);

}  // namespace weft
