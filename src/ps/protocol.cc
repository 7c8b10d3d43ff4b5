#include "ps/protocol.h"

#include <sched.h>
#include <time.h>

#include <cstring>

#include "absl/strings/str_cat.h"

#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TSAN 1
#endif
#endif

#ifdef WEFT_TSAN
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace weft::ps {

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

absl::StatusOr<SegmentView> SegmentView::Of(const SharedSegment& segment) {
  if (segment.size() < sizeof(SegmentHeader)) {
    return absl::FailedPreconditionError(absl::StrCat(segment.name(), ": too small"));
  }
  auto* header = static_cast<SegmentHeader*>(segment.data());
  const uint64_t magic = header->magic.load(std::memory_order_acquire);
  if (magic == 0) {
    // Created, and its server still writing the header (the magic is stored last).
    return absl::UnavailableError(
        absl::StrCat(segment.name(), ": not initialised yet (its server is creating it)"));
  }
  if (magic != kSegmentMagic || header->layout_version != kLayoutVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(segment.name(), ": not a weft parameter server of layout ", kLayoutVersion));
  }
  ServerConfig config;
  config.num_slots = static_cast<int>(header->num_slots);
  config.num_params = header->num_params;
  config.consistency = header->consistency;
  config.staleness = header->staleness;
  config.lease_ms = header->lease_ms;
  config.optimizer = header->optimizer;
  if (!ValidateServerConfig(config).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(segment.name(), ": corrupt header"));
  }
  Layout layout = LayoutFor(config);
  if (layout.total_bytes > segment.size() || layout.params_offset != header->params_offset ||
      layout.state_offset != header->state_offset || layout.slots_offset != header->slots_offset ||
      layout.slot_stride != header->slot_stride) {
    return absl::FailedPreconditionError(
        absl::StrCat(segment.name(), ": header does not match its size"));
  }
  return SegmentView(header);
}

SegmentView SegmentView::Unchecked(void* data) {
  return SegmentView(static_cast<SegmentHeader*>(data));
}

void Backoff::Pause() {
  ++rounds_;
  if (rounds_ <= 64) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return;
  }
  if (rounds_ <= 80) {
    sched_yield();
    return;
  }
  int over = rounds_ - 80;
  timespec ts{0, over >= 20 ? 200'000 : over * 10'000};
  nanosleep(&ts, nullptr);
}

void SeqlockCopy(float* out, const float* params, int64_t n) {
#ifdef WEFT_TSAN
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
  std::memcpy(out, params, static_cast<size_t>(n) * sizeof(float));
#ifdef WEFT_TSAN
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
}

}  // namespace weft::ps
