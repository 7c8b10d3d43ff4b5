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

}  // namespace weft::train
