// The GPUs of weftd's nodes: read from the nodes file (`gpus:` a count, or a list of devices), or
// discovered on this host from the Container Device Interface specs its vendors installed (the
// CDI specification, github.com/cncf-tags/container-device-interface: /etc/cdi and
// /var/run/cdi, the directories podman reads them from).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cluster.h"
#include "yaml-cpp/yaml.h"

namespace weft::daemon {

// Where podman 4.3 reads CDI specs (it has no setting for others).
inline const std::vector<std::string>& DefaultCdiDirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

// A nodes file's `gpus` of entry `where` (e.g. "nodes[1]"): an integer count (devices 0 … n-1,
// without CDI names: the simulator's and older files' form) or a list of
// {index, cdi, model} (index a distinct integer in [0, 1023]; cdi a CDI device name
// vendor/class=name; model free text, at most 128 bytes). Absent: none. Sorted by index.
// InvalidArgument naming `where`.gpus[i] and the field otherwise.
absl::StatusOr<std::vector<scheduler::GpuDevice>> ReadGpus(const YAML::Node& gpus,
                                                           const std::string& where);

// The GPUs the CDI specs (*.yaml, *.yml, *.json) in `dirs` name: the devices of every kind whose
// class is "gpu" (nvidia.com/gpu, amd.com/gpu, …), each given the index its name holds ("0",
// "gpu1"); names without one ("all", a UUID) are left out, and so is a second device of an
// index already seen. A spec that cannot be read is left out with a line in `*warnings`.
// Sorted by index; CDI says nothing of a device's model, so it is left empty.
std::vector<scheduler::GpuDevice> DiscoverCdiGpus(const std::vector<std::string>& dirs,
                                                  std::vector<std::string>* warnings);

}  // namespace weft::daemon
