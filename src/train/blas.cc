#include "train/blas.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace weft::train {

std::string ConfigureBlas(int threads) {
  // OpenBLAS's own entry points, looked up among the libraries the process loaded at start.
  using SetThreads = void (*)(int);
  using GetConfig = char* (*)();
  auto set_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto config = reinterpret_cast<GetConfig>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (set_threads == nullptr) {
    return "BLAS: the system's libblas.so.3 (OpenBLAS not found: scripts/install-deps.sh "
           "unpacks it for weft-learner)";
  }
  set_threads(threads);
  return absl::StrCat("BLAS: OpenBLAS (", config != nullptr ? config() : "unknown build", "), ",
                      threads, threads == 1 ? " thread" : " threads");
}

}  // namespace weft::train
