#include "train/data_parallel.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace weft::train {

namespace {

// The payload that marks an Unavailable as a lost peer (PeerLost).
constexpr char kPeerLostPayload[] = "weft.train/peer-lost";

// A collective's wait is checked against DataParallel::set_give_up's question every
// kGiveUpSliceMs, and given up once it has had an answer for kGiveUpAfterMs (milliseconds):
// long enough for every live peer to finish the step it is in and leave at the next step's
// regroup or stop flag, short of kReformWaitMs, which the new generation's first members wait
// for the rest, and of weftd's stop grace between SIGTERM and SIGKILL (10 s by default).
constexpr int64_t kGiveUpSliceMs = 200;
constexpr int64_t kGiveUpAfterMs = 2000;

// Gradients of some parameters, averaged in one allreduce.
struct Bucket {
  std::vector<size_t> params;    // indexes into the parameter list
  std::vector<int64_t> offsets;  // each one's first element in `buffer`
  int64_t numel = 0;             // gradient elements (the buffer may hold one more: the flag)
  torch::Tensor buffer;          // float32 [numel (+ 1)]
  std::vector<bool> filled;      // this step's gradient copied in, per parameter
  size_t ready = 0;              // how many are filled
  c10::intrusive_ptr<c10d::Work> work;  // this step's allreduce, once started
};

// Waits until something listens on host:port, trying every 10 ms until `deadline`; false if
// nothing did by then (or the host does not resolve). libtorch 1.13's TCPStore client waits a
// whole second before it tries a refused connection again, so a member that asks before rank 0's
// store listens — every member but rank 0, at every group formation — lost that second (measured:
// "joined the process group ... in 916-1020 ms" at start, after a loss and after a grow). The
// probe's own connection is closed at once: the store's server drops it, and it is not counted
// among the workers.
bool WaitForListener(const std::string& host, int port,
                     std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool listening = false;
  for (;;) {
    for (addrinfo* a = found; a != nullptr && !listening; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      listening = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      close(fd);
    }
    if (listening || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(found);
  return listening;
}

}  // namespace

struct DataParallel::Group {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::PrefixStore> keys;  // the group's keys in `store`, per job and attempt
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::vector<torch::Tensor> parameters;  // DataParallel's, set when the buckets are built
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, size_t>> slot_of;  // parameter -> (bucket, index in bucket)
  size_t next = 0;                       // first bucket whose allreduce has not started this step
  bool stop_flag = false;                // this rank's stop flag for this step
  bool regroup_flag = false;             // this rank's regroup flag for this step
  bool armed = false;                    // between BeginStep and FinishStep
  std::string launch_error;              // a collective that could not even be started this step
  std::function<std::string()> give_up;  // DataParallel::set_give_up's
  c10::intrusive_ptr<c10d::Work> given_up;  // the collective Run gave up on, if any

  void OnGradient(size_t k, const torch::Tensor& grad);
  void LaunchReady();
  void Launch(Bucket& bucket);

  absl::Status AllReduce(torch::Tensor& t, c10d::ReduceOp op) {
    return Run([&] {
      std::vector<torch::Tensor> ts = {t};
      c10d::AllreduceOptions o;
      o.reduceOp = op;
      return gloo->allreduce(ts, o);
    });
  }
  absl::Status Broadcast(torch::Tensor t, bool may_give_up = true) {
    return Run(
        [&] {
          std::vector<torch::Tensor> ts = {std::move(t)};
          c10d::BroadcastOptions o;
          o.rootRank = 0;
          return gloo->broadcast(ts, o);
        },
        may_give_up);
  }
  // Starts a collective (`start` returns its Work) and waits for it: Gloo's exceptions stop
  // here, and a failure means a peer is gone. With `may_give_up`, the wait also ends once
  // give_up() has answered for kGiveUpAfterMs (GiveUp); without, it lasts the collective's
  // timeout.
  template <typename Start>
  absl::Status Run(Start start, bool may_give_up = true) {
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      if (!may_give_up || !give_up) {
        work->wait();
        return absl::OkStatus();
      }
      const auto t0 = std::chrono::steady_clock::now();
      // When give_up() first answered in an unbroken run of answers (zero: it has not).
      std::chrono::steady_clock::time_point noticed{};
      for (;;) {
        try {
          work->wait(std::chrono::milliseconds(kGiveUpSliceMs));
          return absl::OkStatus();
        } catch (const c10::Error&) {
          // Work::wait(timeout) throws both on its own timeout and on the collective's failure:
          // a completed work's wait() says which.
          if (work->isCompleted()) {
            work->wait();
            return absl::OkStatus();
          }
        }
        const auto now = std::chrono::steady_clock::now();
        const std::string why = give_up();
        if (why.empty()) {
          noticed = {};
        } else if (noticed == std::chrono::steady_clock::time_point{}) {
          noticed = now;
        } else if (now - noticed >= std::chrono::milliseconds(kGiveUpAfterMs)) {
          return GiveUp(std::move(work), now - t0, why);
        }
      }
    } catch (const c10::Error& e) {
      return PeerLost(e.what_without_backtrace());
    } catch (const std::exception& e) {
      return PeerLost(e.what());
    }
  }

  // Leaves `work` running in Gloo's threads, where it ends at the latest at the collective's
  // timeout; this group is not used again (DataParallel keeps it until then).
  absl::Status GiveUp(c10::intrusive_ptr<c10d::Work> work, std::chrono::nanoseconds waited,
                      const std::string& why) {
    given_up = std::move(work);
    const double ms = std::chrono::duration<double, std::milli>(waited).count();
    spdlog::warn("gave up a collective after {:.0f} ms: {}", ms, why);
    return PeerLost(absl::StrFormat(
        "%s while this learner waited %.0f ms in a collective that did not finish", why, ms));
  }
  // Whether the collective given up on, if any, has ended, so the group's threads are idle.
  bool Idle() const { return !given_up || given_up->isCompleted(); }
};

absl::Status PeerLost(const std::string& what) {
  absl::Status s = absl::UnavailableError(what);
  s.SetPayload(kPeerLostPayload, absl::Cord());
  return s;
}

bool IsPeerLost(const absl::Status& s) {
  return absl::IsUnavailable(s) && s.GetPayload(kPeerLostPayload).has_value();
}

DataParallel::DataParallel(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
DataParallel::~DataParallel() {
  LeaveGroup();
  // A collective still running in a group given up on would hold the learner's exit up to its
  // timeout: the process ends with it instead.
  for (std::unique_ptr<Group>& g : given_up_) (void)g.release();
}

std::unique_ptr<DataParallel> DataParallel::Local() {
  return std::unique_ptr<DataParallel>(new DataParallel(0, 1));
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Connect(
    const std::string& host, int port, int rank, int world_size, int64_t timeout_ms,
    const std::string& prefix, int64_t rendezvous_timeout_ms) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in a world of ", world_size, " learners"));
  }
  std::unique_ptr<DataParallel> dp(new DataParallel(rank, world_size));
  if (world_size == 1) return dp;
  absl::StatusOr<std::unique_ptr<Group>> group =
      Join(host, port, rank, world_size, timeout_ms, prefix, rendezvous_timeout_ms);
  if (!group.ok()) return group.status();
  dp->group_ = std::move(*group);
  return dp;
}

absl::Status DataParallel::Reform(const std::string& host, int port, int rank, int world_size,
                                  int64_t timeout_ms, const std::string& prefix,
                                  int64_t rendezvous_timeout_ms) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in a world of ", world_size, " learners"));
  }
  // Leave the old group first: its connections (to a lost peer, too) close with it. One with a
  // collective given up on is kept until that collective ends: its destructor would wait for it.
  LeaveGroup();
  rank_ = rank;
  world_size_ = world_size;
  if (world_size == 1) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Group>> group =
      Join(host, port, rank, world_size, timeout_ms, prefix, rendezvous_timeout_ms);
  if (!group.ok()) return group.status();
  group_ = std::move(*group);
  group_->give_up = give_up_;
  if (!parameters_.empty()) BuildBuckets();
  return absl::OkStatus();
}

void DataParallel::LeaveGroup() {
  given_up_.erase(std::remove_if(given_up_.begin(), given_up_.end(),
                                 [](const std::unique_ptr<Group>& g) { return g->Idle(); }),
                  given_up_.end());
  if (group_ && !group_->Idle()) given_up_.push_back(std::move(group_));
  group_.reset();
}

void DataParallel::set_give_up(std::function<std::string()> why) {
  give_up_ = std::move(why);
  if (group_) group_->give_up = give_up_;
}

absl::StatusOr<std::unique_ptr<DataParallel::Group>> DataParallel::Join(
    const std::string& host, int port, int rank, int world_size, int64_t timeout_ms,
    const std::string& prefix, int64_t rendezvous_ms) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous port ", port, " is not a port"));
  }
  auto group = std::make_unique<Group>();
  auto t0 = std::chrono::steady_clock::now();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = rank == 0;
    so.numWorkers = world_size;
    so.waitWorkers = true;
    so.timeout = std::chrono::milliseconds(rendezvous_ms > 0 ? rendezvous_ms : timeout_ms);
    // Nothing listening by the deadline: give up now rather than let the store wait as long again.
    if (rank != 0 && !WaitForListener(host, port, t0 + so.timeout)) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous at ", host, ":", port, " as rank ", rank, " of ", world_size,
                       " failed: nothing ", "listened there within ", so.timeout.count(), " ms"));
    }
    group->store = c10::make_intrusive<c10d::TCPStore>(host, so);
    group->keys = c10::make_intrusive<c10d::PrefixStore>(prefix, group->store);
    auto go = c10d::ProcessGroupGloo::Options::create();
    go->timeout = std::chrono::milliseconds(timeout_ms);
    go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    group->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group->keys, rank, world_size, go);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
    return absl::UnavailableError(absl::StrCat("rendezvous at ", host, ":", port, " as rank ", rank,
                                               " of ", world_size, " failed: ", what));
  }
  spdlog::info(
      "joined the process group at {}:{} as rank {} of {} in {:.0f} ms (Gloo)", host, port, rank,
      world_size,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return group;
}

void DataParallel::AttachGradientHooks(const std::vector<torch::Tensor>& parameters,
                                       int64_t bucket_bytes) {
  parameters_ = parameters;
  bucket_bytes_ = bucket_bytes;
  // Hooks on every parameter even without a group: a group formed later (Reform) uses them.
  for (size_t k = 0; k < parameters.size(); ++k) {
    parameters[k].register_hook([this, k](torch::Tensor grad) {
      if (group_) group_->OnGradient(k, grad);
    });
  }
  if (group_) BuildBuckets();
}

void DataParallel::BuildBuckets() {
  Group& g = *group_;
  g.parameters = parameters_;
  g.buckets.clear();
  g.slot_of.assign(parameters_.size(), {0, 0});
  // Last parameter first: backward produces their gradients in roughly that order.
  Bucket current;
  for (size_t k = parameters_.size(); k-- > 0;) {
    const torch::Tensor& p = parameters_[k];
    g.slot_of[k] = {g.buckets.size(), current.params.size()};
    current.params.push_back(k);
    current.offsets.push_back(current.numel);
    current.numel += p.numel();
    if (current.numel * static_cast<int64_t>(sizeof(float)) >= bucket_bytes_) {
      g.buckets.push_back(std::move(current));
      current = Bucket();
    }
  }
  if (!current.params.empty() || g.buckets.empty()) g.buckets.push_back(std::move(current));
  for (size_t b = 0; b < g.buckets.size(); ++b) {
    Bucket& bucket = g.buckets[b];
    // The last bucket carries the stop and regroup flags in two extra elements.
    const int64_t extra = b + 1 == g.buckets.size() ? 2 : 0;
    bucket.buffer = torch::zeros({bucket.numel + extra}, torch::kFloat32);
    bucket.filled.assign(bucket.params.size(), false);
  }
  spdlog::info(
      "gradient averaging: {} parameters in {} bucket(s) of >= {} bytes, overlapped "
      "with the backward pass",
      parameters_.size(), g.buckets.size(), bucket_bytes_);
}

void DataParallel::Group::OnGradient(size_t k, const torch::Tensor& grad) {
  if (!armed) return;
  auto [b, i] = slot_of[k];
  Bucket& bucket = buckets[b];
  const int64_t n = grad.numel();
  bucket.buffer.slice(0, bucket.offsets[i], bucket.offsets[i] + n).view_as(grad).copy_(grad);
  if (!bucket.filled[i]) {
    bucket.filled[i] = true;
    ++bucket.ready;
  }
  LaunchReady();
}

void DataParallel::Group::LaunchReady() {
  while (next < buckets.size() && buckets[next].ready == buckets[next].params.size()) {
    Launch(buckets[next]);
    ++next;
  }
}

void DataParallel::Group::Launch(Bucket& bucket) {
  if (&bucket == &buckets.back()) {
    bucket.buffer[bucket.numel].fill_(stop_flag ? 1.0f : 0.0f);
    bucket.buffer[bucket.numel + 1].fill_(regroup_flag ? 1.0f : 0.0f);
  }
  std::vector<torch::Tensor> ts = {bucket.buffer};
  try {
    bucket.work = gloo->allreduce(ts);
  } catch (const std::exception& e) {
    // Called from an autograd hook: keep the failure for FinishStep rather than throw here.
    if (launch_error.empty()) launch_error = e.what();
  }
}

void DataParallel::BeginStep(bool stop, bool regroup) {
  regroup_ = false;
  if (!group_) {
    local_stop_ = stop;
    regroup_ = regroup;
    return;
  }
  Group& g = *group_;
  for (Bucket& b : g.buckets) {
    std::fill(b.filled.begin(), b.filled.end(), false);
    b.ready = 0;
    b.work.reset();
  }
  g.next = 0;
  g.launch_error.clear();
  g.stop_flag = stop;
  g.regroup_flag = regroup;
  g.armed = true;
}

absl::StatusOr<bool> DataParallel::FinishStep() {
  if (!group_) return local_stop_;
  Group& g = *group_;
  g.armed = false;
  // Parameters that got no gradient this step contribute zeros.
  for (size_t b = g.next; b < g.buckets.size(); ++b) {
    Bucket& bucket = g.buckets[b];
    for (size_t i = 0; i < bucket.params.size(); ++i) {
      if (bucket.filled[i]) continue;
      const int64_t n = g.parameters[bucket.params[i]].numel();
      bucket.buffer.slice(0, bucket.offsets[i], bucket.offsets[i] + n).zero_();
      bucket.filled[i] = true;
      ++bucket.ready;
    }
  }
  g.LaunchReady();
  if (!g.launch_error.empty()) return PeerLost(g.launch_error);
  auto t0 = std::chrono::steady_clock::now();
  for (Bucket& bucket : g.buckets) {
    RETURN_IF_ERROR(g.Run([&bucket] { return bucket.work; }));
  }
  wait_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++wait_steps_;
  const Bucket& last = g.buckets.back();
  const bool any_stop = last.buffer[last.numel].item<float>() > 0;
  regroup_ = last.buffer[last.numel + 1].item<float>() > 0;
  torch::NoGradGuard no_grad;
  for (Bucket& bucket : g.buckets) {
    bucket.buffer.div_(world_size_);
    for (size_t i = 0; i < bucket.params.size(); ++i) {
      torch::Tensor grad = g.parameters[bucket.params[i]].grad();
      if (!grad.defined()) continue;
      const int64_t n = grad.numel();
      grad.copy_(bucket.buffer.slice(0, bucket.offsets[i], bucket.offsets[i] + n).view_as(grad));
    }
  }
  return any_stop;
}

double DataParallel::TakeWaitMs() {
  double ms = wait_steps_ > 0 ? wait_ms_ / wait_steps_ : 0;
  wait_ms_ = 0;
  wait_steps_ = 0;
  return ms;
}

absl::Status DataParallel::BroadcastFromRank0(const std::vector<torch::Tensor>& tensors) {
  if (!group_) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  // Not given up on: a collective left running would write into the model's own tensors.
  for (const torch::Tensor& t : tensors) {
    RETURN_IF_ERROR(group_->Broadcast(t.detach(), /*may_give_up=*/false));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DataParallel::BroadcastBytes(const std::string& bytes) {
  if (!group_) return bytes;
  torch::Tensor size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64);
  RETURN_IF_ERROR(group_->Broadcast(size));
  const int64_t n = size.item<int64_t>();
  torch::Tensor data = torch::empty({n}, torch::kUInt8);
  if (rank_ == 0 && n > 0) std::memcpy(data.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  if (n > 0) RETURN_IF_ERROR(group_->Broadcast(data));
  return std::string(reinterpret_cast<const char*>(data.data_ptr<uint8_t>()),
                     static_cast<size_t>(n));
}

absl::StatusOr<std::vector<double>> DataParallel::Sum(const std::vector<double>& values) {
  if (!group_) return values;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  RETURN_IF_ERROR(group_->AllReduce(t, c10d::ReduceOp::SUM));
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

absl::StatusOr<bool> DataParallel::AllEqual(int64_t value) {
  if (!group_) return true;
  // max(v) and max(-v) = -min(v) in one allreduce.
  torch::Tensor t = torch::tensor({value, -value}, torch::kInt64);
  RETURN_IF_ERROR(group_->AllReduce(t, c10d::ReduceOp::MAX));
  return t[0].item<int64_t>() == value && -t[1].item<int64_t>() == value;
}

}  // namespace weft::train
