#include "ps/shared_client.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/update.h"

namespace weft::ps {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelease = std::memory_order_release;

}  // namespace

absl::StatusOr<std::unique_ptr<SharedPsClient>> SharedPsClient::Attach(const std::string& name,
                                                                       int slot, NowMsFn now) {
  ASSIGN_OR_RETURN(SharedSegment segment, SharedSegment::Open(name));
  ASSIGN_OR_RETURN(SegmentView view, SegmentView::Of(segment));
  if (view.header().closed.load(kAcquire) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(name, ": the parameter server is closed"));
  }
  if (slot < 0 || slot >= view.num_slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", slot, ": the server has slots 0 to ", view.num_slots() - 1));
  }
  uint64_t owner = view.slot(slot).owner.fetch_add(1, std::memory_order_acq_rel) + 1;
  auto client = std::unique_ptr<SharedPsClient>(
      new SharedPsClient(std::move(segment), view, slot, owner, std::move(now)));
  RETURN_IF_ERROR(client->Check());
  return client;
}

SharedPsClient::SharedPsClient(SharedSegment segment, SegmentView view, int slot, uint64_t owner,
                               NowMsFn now)
    : segment_(std::move(segment)),
      view_(view),
      slot_header_(view.slot(slot)),
      slot_(slot),
      owner_(owner),
      now_(std::move(now)) {}

SharedPsClient::~SharedPsClient() {
  // A killed client leaves its lease to run out, as a dead process would.
  if (!killed_ && slot_header_.owner.load(kAcquire) == owner_) {
    slot_header_.lease_until_ms.store(0, kRelease);
  }
}

uint64_t SharedPsClient::published() const { return slot_header_.published.load(kAcquire); }
uint64_t SharedPsClient::applied() const { return slot_header_.applied.load(kAcquire); }

absl::Status SharedPsClient::Check() {
  if (killed_) return absl::AbortedError("the learner was killed (fault injection)");
  if (view_.header().closed.load(kAcquire) != 0) {
    return absl::UnavailableError("the parameter server is closed");
  }
  if (slot_header_.owner.load(kAcquire) != owner_) {
    return absl::AbortedError(absl::StrCat("slot ", slot_, " was taken over by a replacement"));
  }
  if (!done_) slot_header_.lease_until_ms.store(now_() + view_.header().lease_ms, kRelease);
  return absl::OkStatus();
}

void SharedPsClient::Done() {
  done_ = true;
  if (slot_header_.owner.load(kAcquire) == owner_) slot_header_.lease_until_ms.store(0, kRelease);
}

bool SharedPsClient::Killed(KillPoint point) {
  if (kill_hook_ && kill_hook_(point)) killed_ = true;
  return killed_;
}

absl::Status SharedPsClient::WaitUntil(const std::function<bool(int64_t now)>& ready,
                                       int64_t timeout_ms, const char* what) {
  const int64_t deadline = now_() + timeout_ms;
  Backoff backoff;
  for (;;) {
    RETURN_IF_ERROR(Check());
    int64_t now = now_();
    if (ready(now)) return absl::OkStatus();
    if (now > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("slot ", slot_, ": ", what, " within ", timeout_ms, " ms"));
    }
    backoff.Pause();
  }
}

absl::StatusOr<uint64_t> SharedPsClient::Pull(float* out, int64_t timeout_ms) {
  SegmentHeader& header = view_.header();
  const int64_t n = view_.num_params();
  uint64_t version = 0;
  bool copied = false;
  RETURN_IF_ERROR(WaitUntil(
      [&](int64_t) {
        // The seqlock's read side: an even sequence, the copy, an acquire fence, the same
        // sequence again; otherwise the applier wrote meanwhile and the copy is retried.
        const uint64_t before = header.param_seq.load(kAcquire);
        if ((before & 1) != 0) return false;
        version = header.version.load(kRelaxed);
        if (kill_hook_) {
          SeqlockCopy(out, view_.params(), n / 2);
          if (Killed(KillPoint::kPullMidCopy)) return true;
        }
        SeqlockCopy(out, view_.params(), n);
        std::atomic_thread_fence(kAcquire);
        copied = header.param_seq.load(kRelaxed) == before;
        return copied;
      },
      timeout_ms, "no consistent copy of the parameters"));
  if (!copied) return Check();  // killed mid-copy
  return version;
}

bool SharedPsClient::WithinStaleness(uint64_t seq, int64_t now) const {
  const uint64_t staleness = static_cast<uint64_t>(view_.header().staleness);
  for (int j = 0; j < view_.num_slots(); ++j) {
    if (j == slot_) continue;
    const SlotHeader& other = view_.slot(j);
    if (SlotIsLive(other, now) && other.published.load(kAcquire) + staleness + 1 < seq) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<uint64_t> SharedPsClient::Publish(const float* grad, uint64_t base_version,
                                                 int64_t timeout_ms) {
  RETURN_IF_ERROR(Check());
  // Only this slot's learner writes `published`; a replacement goes on from its predecessor's.
  const uint64_t seq = slot_header_.published.load(kRelaxed) + 1;
  const bool ssp = view_.header().consistency == Consistency::kSsp;
  RETURN_IF_ERROR(WaitUntil(
      [&](int64_t now) {
        return slot_header_.applied.load(kAcquire) + 1 >= seq &&
               (!ssp || WithinStaleness(seq, now));
      },
      timeout_ms, ssp ? "slot not free or staleness bound not met" : "slot not free"));
  if (Killed(KillPoint::kPublishBeforeWrite)) return Check();
  const int64_t n = view_.num_params();
  float* slot_gradient = view_.gradient(slot_);
  if (kill_hook_) {
    std::memcpy(slot_gradient, grad, static_cast<size_t>(n / 2) * sizeof(float));
    if (Killed(KillPoint::kPublishMidWrite)) return Check();
  }
  const bool finite = CopyAndCheckFinite(slot_gradient, grad, n);
  slot_header_.non_finite.store(finite ? 0 : 1, kRelaxed);
  slot_header_.base_version.store(base_version, kRelaxed);
  if (Killed(KillPoint::kPublishBeforeRelease)) return Check();
  slot_header_.published.store(seq, kRelease);  // FREE -> FULL: the applier owns the gradient
  if (Killed(KillPoint::kPublishAfterRelease)) return Check();
  return seq;
}

absl::Status SharedPsClient::WaitApplied(uint64_t seq, int64_t timeout_ms) {
  if (Killed(KillPoint::kWaitApplied)) return Check();
  return WaitUntil([&](int64_t) { return slot_header_.applied.load(kAcquire) >= seq; }, timeout_ms,
                   "gradient not applied");
}

}  // namespace weft::ps
