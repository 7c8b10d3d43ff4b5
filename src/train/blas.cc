#include "train/blas.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace weft::train {
namespace {

// OpenBLAS's own entry points, looked up among the libraries the process loaded at start;
// nullptr when the loaded BLAS is not OpenBLAS.
template <typename Fn>
Fn OpenBlasEntry(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::string ConfigureBlas(int threads) {
  auto set_threads = OpenBlasEntry<void (*)(int)>("openblas_set_num_threads");
  auto config = OpenBlasEntry<char* (*)()>("openblas_get_config");
  if (set_threads == nullptr) {
    return "BLAS: the system's libblas.so.3 (OpenBLAS not found: scripts/install-deps.sh "
           "unpacks it for weft-learner)";
  }
  set_threads(threads);
  return absl::StrCat("BLAS: OpenBLAS (", config != nullptr ? config() : "unknown build", "), ",
                      threads, threads == 1 ? " thread" : " threads");
}

int LearnerBlasThreads(int learner_threads) {
  // openblas_get_parallel: 0 single-threaded build, 1 pthreads, 2 OpenMP.
  auto parallel = OpenBlasEntry<int (*)()>("openblas_get_parallel");
  constexpr int kOpenMp = 2;
  return parallel != nullptr && parallel() == kOpenMp ? learner_threads : 1;
}

}  // namespace weft::train
