#include "train/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace weft::train {

std::string TuneAllocatorForTraining() {
  const char* choice = std::getenv("WEFT_LEARNER_MALLOC");
  if (choice && std::strcmp(choice, "default") == 0) {
    return "memory allocator: glibc's defaults (WEFT_LEARNER_MALLOC=default)";
  }
  constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more (HEAP_MAX_SIZE / 2)
  constexpr int kTrimThreshold = 256 << 20;
  // mallopt returns 1 on success. Setting either also stops glibc's own threshold adjustment.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  return absl::StrCat("memory allocator: freed tensors stay in the process (malloc mmap threshold ",
                      mmap_ok ? "32 MiB" : "unchanged: refused", ", trim threshold ",
                      trim_ok ? "256 MiB" : "unchanged: refused", ")");
}

}  // namespace weft::train
