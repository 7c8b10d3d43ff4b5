// The BLAS libtorch's GEMMs run on in this process: OpenBLAS when weft-learner found it through its
// run path (scripts/install-deps.sh unpacks Debian's libopenblas0-openmp;
// src/train/CMakeLists.txt), else the system's libblas.so.3 (Debian's default: netlib's reference
// BLAS).
#pragma once

#include <string>

namespace weft::train {

// Gives OpenBLAS, if it is the loaded BLAS, `threads` threads; returns a line for the log saying
// which BLAS runs and, for OpenBLAS, its build and threads. In an OpenMP build this is also
// libtorch's intra-op thread count (OpenBLAS sets it with omp_set_num_threads): pass
// LearnerBlasThreads(), which keeps the two equal.
std::string ConfigureBlas(int threads);

// The OpenBLAS threads of a learner with `learner_threads` libtorch intra-op threads.
// - OpenMP build (libopenblas0-openmp, what weft-learner loads): `learner_threads`. Its GEMMs run
//   on the same libgomp pool as libtorch's own kernels, one pool taking turns. Measured on 2
//   cores with 2 threads (bench_bare_loop mlp, batch 64, alternating, 2026-11-27): 106,000–109,200
//   samples/s, against 74,400–76,700 with the pthread build on one thread; the CNN, whose layers
//   pick oneDNN at 2 threads, within noise.
// - Any other OpenBLAS (libopenblas0-pthread): 1. It keeps a pool of pthreads of its own beside
//   libtorch's OpenMP pool, and after their work both spin on the same cores: with 2 threads the
//   CNN ran 2,550–2,950 samples/s whenever fc1 ran on BLAS and 5,500–5,950 when it did not; on
//   the calling thread alone, 5,570–6,160 whatever the kernels.
// A GEMM's threads are what the per-layer and whole-step timings of ChooseKernels
// (train/models.h) see and weigh.
int LearnerBlasThreads(int learner_threads);

}  // namespace weft::train
