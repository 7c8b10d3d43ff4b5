// The BLAS libtorch's GEMMs run on in this process: OpenBLAS when weft-learner found it through its
// run path (scripts/install-deps.sh unpacks it; src/train/CMakeLists.txt), else the system's
// libblas.so.3 (Debian's default: netlib's reference BLAS).
#pragma once

#include <string>

namespace weft::train {

// Gives OpenBLAS, if it is the loaded BLAS, `threads` threads (its default is every core, which
// would oversubscribe a learner's cpus); returns a line for the log saying which BLAS runs and,
// for OpenBLAS, its build and threads.
std::string ConfigureBlas(int threads);

// The OpenBLAS threads of a learner, whatever its libtorch's intra-op threads. OpenBLAS (Debian's
// libopenblas0-pthread) keeps its own pool of pthreads beside libtorch's OpenMP pool, and after
// their work both spin on the same cores: measured on 2 cores with 2 threads (bench_bare_loop,
// 2026-11-27), the CNN ran 2,550–2,950 samples/s when fc1 was on BLAS and 5,500–5,950 when it was
// not, the MLP 20,500–61,000; with OpenBLAS on the calling thread alone, 5,570–6,160 and
// 75,600–76,500, whatever the kernels. A GEMM on BLAS then uses one core, which the per-layer and
// whole-step timings of ChooseKernels (train/models.h) see and weigh.
inline constexpr int kLearnerBlasThreads = 1;

}  // namespace weft::train
