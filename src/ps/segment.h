// A POSIX shared-memory object mapped into this process (shm_open + mmap): the home of a job
// attempt's parameter server on one node. Created owner-only (mode 0600) and exclusively; opened
// only when this user owns it and nobody else may touch it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace weft::ps {

// The shared-memory name of a job attempt's parameter server, "/weft-ps-<job id>-<attempt>".
// InvalidArgument when the job id is empty, longer than 64 bytes or holds anything but
// [A-Za-z0-9_-], or when attempt < 1.
absl::StatusOr<std::string> SegmentNameForJob(std::string_view job_id, int attempt);

class SharedSegment {
 public:
  // Creates `name` (a SegmentNameForJob name) with `bytes` bytes, zero-filled, mode 0600, and maps
  // it. AlreadyExists when the name exists; InvalidArgument for 0 bytes; ResourceExhausted when
  // /dev/shm has no room; Internal for other OS errors (with the errno text).
  static absl::StatusOr<SharedSegment> Create(const std::string& name, size_t bytes);
  // Maps an existing object whole. NotFound when there is none; Unavailable while it is empty
  // (created, not yet sized); PermissionDenied when another user owns it or its mode lets group
  // or others in; Internal for other OS errors.
  static absl::StatusOr<SharedSegment> Open(const std::string& name);
  // Removes the name; mappings stay valid until unmapped. NotFound when there is none.
  static absl::Status Unlink(const std::string& name);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();  // unmaps (does not unlink)

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  SharedSegment(std::string name, void* data, size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  void Reset();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace weft::ps
