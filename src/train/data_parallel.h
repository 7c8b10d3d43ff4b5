// Synchronous data parallelism for one job's learners: every rank runs the same model on a
// disjoint part of each batch's data, and after every backward pass the gradients are averaged
// across ranks with c10d's ProcessGroupGloo (ring allreduce over TCP). Rendezvous goes through a
// c10d TCPStore that rank 0 serves at the address weftd hands out (MASTER_ADDR:MASTER_PORT).
//
// The last collective that averages a step's gradients also carries each rank's "stop" flag, so all
// ranks stop after the same step and rank 0's checkpoint of that step is the job's consistent
// state (every replica holds the same parameters after each step).
//
// With world_size 1 nothing is connected and every call is local.
// Not thread-safe: one training thread per learner calls it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::train {

// A collective failed: another learner of the gang is gone (its connection closed) or did not
// answer within the timeout; the step being averaged was not applied. Unavailable, marked so
// that IsPeerLost tells it from any other Unavailable (weftd out of reach, say). `what`: Gloo's
// message.
absl::Status PeerLost(const std::string& what);
bool IsPeerLost(const absl::Status& s);

class DataParallel {
 public:
  // Joins the job's process group: rank 0 serves the TCPStore on `port` of `host`, the others
  // connect to it; everyone then sets up Gloo's pairwise connections. Waits up to `timeout_ms`
  // milliseconds for all `world_size` ranks. Unavailable if they do not all arrive in time or the
  // port cannot be bound; InvalidArgument for a bad rank/world size. Every key the group keeps in
  // the store is under `prefix` (the job and attempt, e.g. "job-x/attempt-3/"), so a learner of
  // another attempt or job that reaches the same host:port meets none of this group's keys.
  // `rendezvous_timeout_ms` (> 0), when given, bounds the wait for the others in the store
  // instead (milliseconds); `timeout_ms` stays every collective's.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Connect(const std::string& host, int port,
                                                               int rank, int world_size,
                                                               int64_t timeout_ms,
                                                               const std::string& prefix,
                                                               int64_t rendezvous_timeout_ms = 0);
  // A single-learner job: no process group.
  static std::unique_ptr<DataParallel> Local();
  // Leaves the current group (if any) and joins a new one as `rank` of `world_size`, as Connect
  // does, under a new `prefix` (the job, attempt and generation, e.g. "job-x/attempt-3/gen-2/"),
  // keeping the gradient hooks: the in-place membership change of an elastic job. The old
  // group's connections close first, so a lost peer holds nothing up (a group with a collective
  // given up on stays open until that ends; see set_give_up); a world of 1 leaves no group.
  // Errors as Connect's; after one this object has no group and must not step.
  absl::Status Reform(const std::string& host, int port, int rank, int world_size,
                      int64_t timeout_ms, const std::string& prefix,
                      int64_t rendezvous_timeout_ms = 0);
  ~DataParallel();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Why a collective this learner waits in should be given up, asked on the training thread
  // every 200 ms of the wait: empty while it should go on waiting. A collective that has waited
  // while the answer was not empty for 2 s is given up, PeerLost naming that answer: a peer can
  // die without a word on this learner's connections (Gloo then waits out the whole collective
  // timeout, 120 s by default: a survivor in an elastic gang test waited all of it, and a fixed
  // gang's rank 0 in a CI run waited until its SIGKILL), so the learner gives up once weftd has
  // moved its job to a later generation (whose members wait for it only kReformWaitMs) or once it
  // was asked to stop (SIGKILL follows after weftd's stop grace, 10 s by default, and rank 0 must
  // checkpoint before it). A group with a collective given up on is not used
  // again and is kept, not closed, until that collective ends. BroadcastFromRank0 is never given
  // up on.
  void set_give_up(std::function<std::string()> why);

  // Gradient averaging overlapped with the backward pass, as PyTorch DDP does (Li et al.,
  // "PyTorch Distributed", VLDB'20): `parameters` are grouped, last layer first, into buckets of
  // at least `bucket_bytes` bytes; a hook on each parameter copies its gradient into its bucket,
  // and a bucket's allreduce (SUM) starts in Gloo's threads as soon as it is full and every
  // earlier bucket has started, so all ranks issue the same collectives in the same order. Call
  // once, after the model's parameters are final (after a restore).
  void AttachGradientHooks(const std::vector<torch::Tensor>& parameters,
                           int64_t bucket_bytes = int64_t{1} << 20);
  // Before a step's backward pass: arms the buckets; `stop` is this rank's stop flag and
  // `regroup` whether it knows of a later membership generation, carried as two extra elements
  // of the last bucket.
  void BeginStep(bool stop, bool regroup = false);
  // After the backward pass: starts any bucket still pending (a parameter that got no gradient
  // contributes zeros), waits for all, replaces each parameter's gradient with its mean over
  // the ranks, and returns whether any rank passed stop = true. PeerLost if a peer is gone.
  // Without a process group it only returns `stop`.
  absl::StatusOr<bool> FinishStep();
  // After FinishStep: whether any rank passed regroup = true, so all re-form after this step.
  bool regroup_requested() const { return regroup_; }

  // Mean time per step, in milliseconds, FinishStep() spent waiting for the allreduce to end
  // (the part not hidden behind the backward pass), since the last call.
  double TakeWaitMs();

  // The collectives below return PeerLost if a peer is gone.
  // Overwrites `tensors` on every rank with rank 0's values (parameters and buffers after
  // initialisation or a restore).
  absl::Status BroadcastFromRank0(const std::vector<torch::Tensor>& tensors);

  // Rank 0's `bytes` on every rank (what the others pass is ignored): e.g. a serialised training
  // state for learners that join a group.
  absl::StatusOr<std::string> BroadcastBytes(const std::string& bytes);

  // Element-wise sum over ranks of a float64 vector (evaluation counts).
  absl::StatusOr<std::vector<double>> Sum(const std::vector<double>& values);

  // Whether every rank passed the same `value` (e.g. the step it resumed from).
  absl::StatusOr<bool> AllEqual(int64_t value);

 private:
  struct Group;  // the TCPStore and ProcessGroupGloo (c10d headers stay in the .cc)
  DataParallel(int rank, int world_size);
  static absl::StatusOr<std::unique_ptr<Group>> Join(const std::string& host, int port, int rank,
                                                     int world_size, int64_t timeout_ms,
                                                     const std::string& prefix,
                                                     int64_t rendezvous_ms);
  // The gradient buckets of parameters_ in group_.
  void BuildBuckets();
  // Drops group_, or keeps it in given_up_ while a collective given up on still runs in it;
  // frees the groups of given_up_ whose collective has ended.
  void LeaveGroup();

  int rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<Group> group_;                  // null when world_size is 1
  std::vector<std::unique_ptr<Group>> given_up_;  // left with a collective still running
  std::function<std::string()> give_up_;          // set_give_up's, given to every group
  std::vector<torch::Tensor> parameters_;         // AttachGradientHooks'
  int64_t bucket_bytes_ = 0;
  bool local_stop_ = false;  // BeginStep's flag without a group
  bool regroup_ = false;     // any rank's regroup flag in the last step
  double wait_ms_ = 0;
  int64_t wait_steps_ = 0;
};

}  // namespace weft::train
