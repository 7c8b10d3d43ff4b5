// A reader of the server-sent-events stream format (WHATWG HTML, "Server-sent events",
// section 9.2.6 "Interpreting an event stream"): bytes in, whole events out. `weft follow` reads
// weftd's /v1/jobs/{id}/events with it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace weft {

struct SseEvent {
  std::string id;     // the `id:` field ("" when the event had none)
  std::string event;  // the `event:` field; "message" when the event had none
  std::string data;   // the `data:` lines joined by "\n"
};

class SseParser {
 public:
  // A line longer than `max_line_bytes` is an error: a server cannot make the reader hold an
  // unbounded line.
  explicit SseParser(size_t max_line_bytes = 8 << 20) : max_line_bytes_(max_line_bytes) {}

  // Reads `bytes` (any split of the stream: a line or an event may span calls) and calls
  // `on_event` for every event a blank line completes, in order. Comment lines (":...") and
  // unknown fields are skipped; lines end in "\n", "\r\n" or "\r". False once a line exceeded the
  // bound (the stream is then unusable).
  bool Feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event);

 private:
  void Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event);

  const size_t max_line_bytes_;
  std::string line_;       // the line read so far
  bool after_cr_ = false;  // the last byte was "\r": a "\n" next ends nothing new
  bool broken_ = false;
  SseEvent event_;         // the event read so far
  bool has_data_ = false;  // a data line was read (an event without one is not dispatched)
};

}  // namespace weft
