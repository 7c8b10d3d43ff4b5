// libFuzzer target: the coordinator's request handling (control/coordinator_service.h and the
// controller behind it) on any request a learner could send.
//   byte 0: the call (Register, Heartbeat, ReportMetrics, CommitModel, CommitCheckpoint,
//           ReportFinished)
//   byte 1: bit 0 puts the World's job id in the learner identity, bit 1 its credential, bit 2
//           attempt 1, so inputs get past authentication as a real learner would
//   then the request message in protobuf's binary form.
// Every call must answer with a status a learner can act on (never INTERNAL or UNKNOWN), and the
// job must still load from the store afterwards; a crash or sanitizer report fails.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "control/coordinator_service.h"
#include "fuzz/fuzz_world.h"

namespace weft::fuzz {
namespace {

template <typename Request>
bool Parse(const uint8_t* data, size_t size, uint8_t flags, Request* req) {
  if (!req->ParseFromArray(data, static_cast<int>(size))) return false;
  World& w = World::Get();
  v1::LearnerIdentity* id = req->mutable_learner();
  if (flags & 1) id->set_job_id(w.job_id);
  if (flags & 2) id->set_credential(w.job_credential);
  if (flags & 4) id->set_attempt(1);
  return true;
}

template <typename Request, typename Response, typename Method>
grpc::Status Call(CoordinatorService& service, Method method, const uint8_t* data, size_t size,
                  uint8_t flags, bool* parsed) {
  Request req;
  Response resp;
  *parsed = Parse(data, size, flags, &req);
  if (!*parsed) return grpc::Status::OK;
  grpc::ServerContext context;
  return (service.*method)(&context, &req, &resp);
}

}  // namespace
}  // namespace weft::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  using weft::fuzz::Call;
  fuzz::World& w = fuzz::World::Get();
  static auto* service =
      new CoordinatorService(*w.controller, w.controller->credentials(), /*heartbeat ms=*/1000);
  if (size < 2) return 0;
  const uint8_t call = data[0] % 6, flags = data[1];
  data += 2;
  size -= 2;
  bool parsed = false;
  grpc::Status s;
  switch (call) {
    case 0:
      s = Call<v1::RegisterRequest, v1::RegisterResponse>(*service, &CoordinatorService::Register,
                                                          data, size, flags, &parsed);
      break;
    case 1:
      s = Call<v1::HeartbeatRequest, v1::HeartbeatResponse>(
          *service, &CoordinatorService::Heartbeat, data, size, flags, &parsed);
      break;
    case 2:
      s = Call<v1::ReportMetricsRequest, v1::ReportMetricsResponse>(
          *service, &CoordinatorService::ReportMetrics, data, size, flags, &parsed);
      break;
    case 3:
      s = Call<v1::CommitModelRequest, v1::CommitModelResponse>(
          *service, &CoordinatorService::CommitModel, data, size, flags, &parsed);
      break;
    case 4:
      s = Call<v1::CommitCheckpointRequest, v1::CommitCheckpointResponse>(
          *service, &CoordinatorService::CommitCheckpoint, data, size, flags, &parsed);
      break;
    default:
      s = Call<v1::ReportFinishedRequest, v1::ReportFinishedResponse>(
          *service, &CoordinatorService::ReportFinished, data, size, flags, &parsed);
  }
  if (!parsed) return 0;
  if (s.error_code() == grpc::StatusCode::INTERNAL || s.error_code() == grpc::StatusCode::UNKNOWN) {
    std::cerr << "fuzz_coordinator: call " << int{call} << " answered " << s.error_code() << ": "
              << s.error_message() << "\n";
    std::abort();
  }
  if (auto job = w.store->GetJob(w.job_id); !job.ok()) {
    std::cerr << "fuzz_coordinator: the job no longer loads: " << job.status() << "\n";
    std::abort();
  }
  // Settled jobs refuse everything; start another attempt now and then to reach deeper states.
  w.controller->Tick();
  w.executor.launches.clear();
  w.executor.stopped.clear();
  return 0;
}
