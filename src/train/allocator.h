// How the learner's process allocates memory for tensors.
#pragma once

#include <string>

namespace weft::train {

// Keeps freed tensor memory in the process for the next step instead of handing it back to the
// kernel. libtorch allocates every activation and gradient with malloc; glibc's malloc serves
// blocks above its mmap threshold (128 KiB at start, raised only as chance frees dictate) with
// mmap and trims the heap's top beyond its trim threshold, so a training step can unmap
// megabytes of activations and fault them back in page by page on the next one. Measured on the
// example CNN, batch 64, one thread, 120 steps: with glibc's defaults 42,000 to 607,000 minor
// page faults and up to 9 % of the time in the kernel, depending on which thresholds glibc
// happened to reach in that run; with this, ≈ 70 faults per step and < 1 % in the kernel.
//
// Sets M_MMAP_THRESHOLD to 32 MiB (glibc's maximum) and M_TRIM_THRESHOLD to 256 MiB. The cost is
// that up to 256 MiB freed at the heap's top stays in the process. Skipped when the environment
// has WEFT_LEARNER_MALLOC=default (glibc's defaults, for comparison). Returns a line for the log:
// what was set, or why nothing was.
std::string TuneAllocatorForTraining();

}  // namespace weft::train
