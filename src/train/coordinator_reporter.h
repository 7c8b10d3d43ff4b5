// Reporter over gRPC to weftd's Coordinator service. A background thread sends queued metric
// samples (or a heartbeat when there are none) every heartbeat interval; while weftd is
// unreachable samples stay queued and are sent once it answers again. With several weftd in
// active/standby, the reporter knows each one's coordinator address and moves to the next when
// the one it calls is unavailable (a standby answers UNAVAILABLE); answers bring the current
// list, the leader's first.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator.grpc.pb.h"
#include "train/reporter.h"

namespace weft::train {

class CoordinatorReporter : public Reporter {
 public:
  // `address`: host:port of the Coordinator service, or several, comma-separated (tried in
  // turn).
  // `credential` is the job's WEFT_JOB_CREDENTIAL, sent with every call.
  // `ca_pem`: the PEM certificates the coordinator's TLS certificate must chain to (its host
  // must match `address`); empty: plain text.
  CoordinatorReporter(const std::string& address, std::string job_id, int rank, int64_t attempt,
                      std::string credential = "", const std::string& ca_pem = "");
  ~CoordinatorReporter() override;
  CoordinatorReporter(const CoordinatorReporter&) = delete;
  CoordinatorReporter& operator=(const CoordinatorReporter&) = delete;

  absl::Status Register(int world_size, const std::vector<int>& gpus) override;
  void Report(const MetricSample& sample, const ProgressReport& progress) override;
  void ReportProgress(const ProgressReport& progress) override;
  std::vector<std::string> ResumeFrom() const override { return resume_from_; }
  bool KeepRunning() const override { return keep_running_.load(); }
  absl::Status CommitModel(const ModelFile& model) override;
  absl::Status CommitCheckpoint(const std::string& path, int epoch, int64_t step, int64_t bytes,
                                double write_seconds) override;
  void Finish(bool succeeded, const std::string& reason, double best_test_accuracy) override;
  absl::StatusOr<Membership> Regroup(int64_t generation, int64_t step) override;
  int64_t Generation() const override { return generation_.load(); }

 private:
  void Loop();
  bool Flush();  // sends queued samples or a heartbeat; false if weftd did not answer
  weft::v1::LearnerIdentity Identity() const;
  using Stub = weft::v1::Coordinator::Stub;
  // The coordinator to call now.
  std::shared_ptr<Stub> Current();
  // `failed` did not answer: the next address becomes current (if `failed` still is).
  void Failover(const std::shared_ptr<Stub>& failed);
  // Takes the list an answer brought, when there is one and it differs; its first is current.
  template <typename Addresses>
  void UseCoordinators(const Addresses& addresses);
  // Calls `rpc(Stub&)` until it succeeds or the retry budget is spent, failing over between
  // coordinators and backing off 100 ms .. 2 s.
  template <typename Rpc>
  grpc::Status Retry(Rpc rpc);

  const std::string job_id_;
  const int rank_;
  const int64_t attempt_;
  const std::string credential_;
  const std::string ca_pem_;
  absl::Mutex stub_mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(stub_mu_);
  std::vector<std::shared_ptr<Stub>> stubs_ ABSL_GUARDED_BY(stub_mu_);
  size_t current_ ABSL_GUARDED_BY(stub_mu_) = 0;
  std::atomic<bool> keep_running_{true};
  std::atomic<int> heartbeat_ms_{1000};
  std::atomic<int> next_heartbeat_ms_{0};  // the last answer's next_heartbeat_ms (0: none)
  std::atomic<int64_t> generation_{0};     // the job's, as weftd's latest answer said
  std::vector<std::string> resume_from_;   // written once by Register

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<MetricSample> queued_ ABSL_GUARDED_BY(mu_);
  ProgressReport progress_ ABSL_GUARDED_BY(mu_);
  absl::Mutex send_mu_;  // one RPC that carries samples at a time, so they arrive in order
  std::thread thread_;
};

}  // namespace weft::train
