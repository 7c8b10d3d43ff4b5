#include "common/sse.h"

namespace weft {

bool SseParser::Feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event) {
  if (broken_) return false;
  for (char c : bytes) {
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      Line(line_, on_event);
      line_.clear();
      continue;
    }
    if (line_.size() >= max_line_bytes_) {
      broken_ = true;
      return false;
    }
    line_.push_back(c);
  }
  return true;
}

void SseParser::Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event) {
  if (line.empty()) {  // dispatch
    if (has_data_) {
      if (event_.event.empty()) event_.event = "message";
      on_event(event_);
    }
    event_.event.clear();
    event_.data.clear();
    has_data_ = false;  // the id is kept: it is the stream's last event id until changed
    return;
  }
  if (line.front() == ':') return;  // a comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) event_.data.push_back('\n');
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.event = std::string(value);
  } else if (field == "id" && value.find('\0') == std::string_view::npos) {
    event_.id = std::string(value);
  }
}

}  // namespace weft
