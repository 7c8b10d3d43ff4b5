// What kind of archive a file offered as a container image is, read from its tar headers alone
// (plain or gzip-compressed): an OCI image layout (`podman save --format oci-archive`: oci-layout
// and index.json at its top), a Docker archive (`docker save`, `podman save`: manifest.json), or a
// root file system (mmdebstrap's tarball, `podman export`: bin, usr or etc at its top). The file is
// a tenant's: only its entries' names are read, at most kMaxArchiveEntries of them.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace weft {

inline constexpr char kOciArchive[] = "oci-archive";
inline constexpr char kDockerArchive[] = "docker-archive";
inline constexpr char kRootfsArchive[] = "rootfs";
inline constexpr int kMaxArchiveEntries = 1000000;

// kOciArchive, kDockerArchive or kRootfsArchive for the archive at `path`. InvalidArgument saying
// what is wrong: not a tar archive (or a corrupt one), or a tar archive that is none of the three.
// NotFound when the file cannot be opened.
absl::StatusOr<std::string> ImageArchiveFormat(const std::string& path);

}  // namespace weft
