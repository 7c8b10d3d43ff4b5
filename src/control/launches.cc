// What a job's learners and parameter servers are started with (control/launches.h).
#include "control/launches.h"

#include "absl/strings/str_cat.h"
#include "control/datasets.h"
#include "control/images.h"
#include "ps/segment.h"
#include "ps/shard.h"
#include "spdlog/spdlog.h"

namespace weft {
namespace {

// The attempt's weft-ps TLS identity. Closed, not open, if it cannot be made: a certificate and
// key that do not load fail the shards and their learners, and weftd says why.
TlsIdentity ParameterServerTls(const LearnerCredentials& credentials, const JobRecord& r) {
  absl::StatusOr<TlsIdentity> id = credentials.ParameterServerTls(r.id, r.attempt, ps::kPsTlsName);
  if (id.ok()) return *std::move(id);
  spdlog::error("job {} attempt {}: no TLS identity for its parameter servers: {}", r.id, r.attempt,
                std::string(id.status().message()));
  return {"(no identity)", "(no identity)"};
}

}  // namespace

Launches::Launches(Store& store, const Executor& executor, const LearnerCredentials& credentials,
                   const ControllerOptions& options, const JobLayout& layout)
    : store_(store),
      executor_(executor),
      credentials_(credentials),
      options_(options),
      layout_(layout),
      coordinator_address_(options.coordinator_address) {}

void Launches::SetCoordinatorAddress(const std::string& address) {
  absl::MutexLock lock(&address_mu_);
  coordinator_address_ = address;
}

std::string Launches::CoordinatorAddress() const {
  absl::MutexLock lock(&address_mu_);
  return coordinator_address_;
}

absl::StatusOr<DatasetRecord> Launches::DataSet(const JobRecord& r, const JobSpec& spec) const {
  if (!spec.data.artifact.empty()) {  // linked into the job at submission
    return DatasetRecord{
        spec.data.artifact, layout_.DataDir(r.id), "tensors", false, {r.tenant}, 0};
  }
  if (spec.data.dataset.empty()) return DatasetRecord{};  // a command job that reads none
  if (!spec.data.path.empty()) {                          // checked when it was submitted
    return DatasetRecord{spec.data.dataset, spec.data.path, "idx", false, {r.tenant}, 0};
  }
  absl::StatusOr<DatasetRecord> d = ResolveDataset(store_, spec.data.dataset, r.tenant);
  if (!d.ok()) {
    return absl::Status(
        d.status().code(),
        absl::StrCat("data.dataset: ", d.status().message(),
                     " (removed or no longer granted since the job was submitted)"));
  }
  return d;
}

void Launches::SetGpus(const std::vector<int>& gpus, LearnerLaunch* l) const {
  l->gpus = gpus;
  l->gpu_devices.assign(gpus.size(), "");
  for (const scheduler::Node& n : options_.nodes) {
    if (n.name != l->node) continue;
    for (size_t i = 0; i < gpus.size(); ++i) {
      for (const scheduler::GpuDevice& g : n.gpu_devices) {
        if (g.index == gpus[i]) l->gpu_devices[i] = g.cdi;
      }
    }
  }
}

LearnerLaunch Launches::Learner(const JobRecord& r, const JobSpec& spec, int rank,
                                const std::pair<std::string, int>& rendezvous,
                                const DatasetRecord& data) const {
  LearnerLaunch l;
  l.job_id = r.id;
  l.attempt = r.attempt;
  const bool placed = rank < static_cast<int>(r.learners.size());
  // The learner's id: its rank as started (after an in-place membership change the two differ).
  l.rank = placed ? r.learners[rank].id : rank;
  l.world_size = static_cast<int>(r.learners.size());  // an elastic job's: as placed
  l.node = placed ? r.learners[rank].node : "";
  if (l.world_size > 1) {
    l.rendezvous_host = rendezvous.first;
    l.rendezvous_port = rendezvous.second;
  }
  l.spec_path = layout_.SpecPath(r.id);
  l.data_dir = data.path;
  if (!data.format.empty()) l.data_format = data.format;
  l.result_dir = layout_.ResultDir(r.id);
  l.checkpoint_dir = layout_.CheckpointDir(r.id);
  if (spec.model.architecture == "torchscript" || spec.IsCommandJob()) {
    l.model_dir = layout_.DefinitionDir(r.id);
  }
  if (spec.IsCommandJob()) {
    l.work_dir = WorkDir(layout_.WorkRoot(r.id), l.rank);
    l.private_dir = options_.data_dir;
    l.sandbox_required = !options_.allow_unsandboxed_commands;
  }
  l.log_dir = layout_.LogDir(r.id);
  l.coordinator_address = CoordinatorAddress();
  l.coordinator_ca_path = options_.coordinator_ca_path;
  l.threads = spec.EffectiveThreads();
  l.memory_limit_mb = spec.resources.memory_mb;
  l.cpus = spec.resources.cpus;
  l.credential = credentials_.For(r.id, r.attempt);
  if (auto it = options_.node_cpusets.find(l.node); it != options_.node_cpusets.end()) {
    l.cpuset = it->second;
  }
  if (placed) SetGpus(r.learners[rank].gpus, &l);
  for (const ServerSlot& server : r.servers) l.ps_servers.push_back(server.address);
  if (!l.ps_servers.empty()) {
    l.ps_credential = credentials_.For(r.id, r.attempt, CredentialRole::kParameterServer);
    if (options_.ps_tls) l.ps_tls_cert = ParameterServerTls(credentials_, r).cert_pem;
  }
  if (spec.UsesParameterServer() && spec.training.ps.servers == 1 && l.rank == 0) {
    // Rank 0 hosts GaDei's server in shared memory and removes it when it ends well.
    l.leftover_shm = ps::SegmentNameForJob(r.id, static_cast<int>(r.attempt)).value_or("");
  }
  // A gang on one host trains as one learner: rank 0 with the gang's threads and memory.
  l.learners_as_one = LearnersAsOne(r, spec);
  if (l.learners_as_one > 1 && l.rank == 0) {
    l.threads = spec.AsOneLearner(l.learners_as_one).EffectiveThreads();
    l.memory_limit_mb *= l.learners_as_one;
    l.cpus *= l.learners_as_one;
  }
  return l;
}

int Launches::LearnersAsOne(const JobRecord& r, const JobSpec& spec) const {
  if (!executor_.TrainsGangsAsOneLearner()) return 1;
  std::vector<std::string> nodes;
  for (const LearnerSlot& l : r.learners) nodes.push_back(l.node);
  return spec.LearnersAsOne(nodes);
}

LearnerLaunch Launches::Server(const JobRecord& r, const JobSpec& spec, int index,
                               const DatasetRecord& data) const {
  LearnerLaunch l = Learner(r, spec, 0, {}, data);
  l.rank = static_cast<int>(r.learners.size()) + index;
  l.node = r.servers[index].node;
  l.ps_server = index;
  l.credential.clear();  // a shard holds its own role's credential only
  if (options_.ps_tls) l.ps_tls_key = ParameterServerTls(credentials_, r).key_pem;
  l.threads = 1;  // the applier is one thread
  l.cpuset.clear();
  if (auto it = options_.node_cpusets.find(l.node); it != options_.node_cpusets.end()) {
    l.cpuset = it->second;
  }
  return l;
}

absl::StatusOr<std::string> Launches::Image(const JobRecord& r, const JobSpec& spec) const {
  if (spec.image.empty()) return std::string();  // weft's runtime image
  if (options_.images == nullptr || !options_.images->enabled()) {
    return absl::NotFoundError(absl::StrCat("image: ", kNoImageEngine));
  }
  absl::StatusOr<ImageRecord> image = options_.images->Resolve(r.tenant, spec.image);
  if (!image.ok()) {
    return absl::Status(
        image.status().code(),
        absl::StrCat("image: ", image.status().message(),
                     " (deleted or no longer granted since the job was submitted)"));
  }
  return image->reference;
}

}  // namespace weft
