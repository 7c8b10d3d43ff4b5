#!/usr/bin/env bash
# Installs every build, test and runtime dependency of weft from Debian's packages.
# Idempotent: packages already present are skipped; apt-get update runs only when needed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libtorch-dev libgloo-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev libsqlite3-dev
  libspdlog-dev libfmt-dev libcli11-dev libabsl-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libqhull-dev gnuplot-nox
  dataset-fashion-mnist
  curl python3
  # scripts/check.sh: the formatter, clang's thread-safety analysis and function sizes
  clang-format clang-tidy
  # scripts/fuzz.sh: libFuzzer and the sanitizers' runtimes for clang
  clang libclang-rt-14-dev
  # torchscript_test: PyTorch loads a model weft delivers (torch.jit.load) and runs it;
  # command jobs: the example program trains with it
  python3-torch
  # the Python client (sdk/python): its tests (python_client_test) run Debian's pytest against
  # a real weftd; PyYAML applies overrides to YAML manifests; pip installs it offline
  python3-pytest python3-yaml python3-pip
  # examples/notebooks/fashion-mnist.ipynb: python_notebook_test executes it headless
  jupyter-nbconvert python3-ipykernel python3-matplotlib
  # every learner runs in a container (src/executor/container_runtime.h): podman with runc (crun
  # refuses these hosts' hybrid cgroups) and catatonit as each container's init; mmdebstrap
  # builds weft's runtime image (scripts/build-runtime-image.sh); netavark is podman's network
  # backend, which it loads even for --network none; skopeo copies a tenant's image archive
  # into podman's storage under weft's name (src/control/images.h)
  podman runc catatonit conmon netavark mmdebstrap skopeo
  # weftd --runtime bwrap runs learners in bubblewrap's sandbox (setpriv is util-linux's)
  bubblewrap util-linux
  # tls_test makes a self-signed certificate
  openssl
  # dashboard_test drives the web dashboard in a real headless browser
  chromium
  # the PostgreSQL store (weftd --store postgresql://…) and the throwaway clusters its tests
  # start (pg_store_test, postgresql_test)
  libpqxx-dev postgresql
  # a real Slurm cluster in the test suite (tests/executor/slurm_cluster.h: munged, slurmctld and
  # a slurmd per logical node, started by the tests themselves; no service is enabled)
  slurm-wlm munge
  # the build renders docs/architecture.dot (Graphviz) to build/docs/architecture.svg
  graphviz
  # OpenBLAS's own dependencies (OpenBLAS itself is unpacked, below)
  libgfortran5 libgomp1
)
# The dashboard's chart library (bundled into weftd at build time), dashboard_test's browser
# driver and scripts/lint-openapi.sh's Redocly CLI come from npm: Node.js and npm (Debian's,
# unless a node is present).
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi
# Optional: the PyTorch reference for bench/ (not needed to build or test).
if [[ "${WEFT_WITH_BENCH_DEPS:-0}" == "1" ]]; then
  PACKAGES+=(python3-numpy python3-optuna wrk)
fi

# api_contract_test checks GET /metrics with Prometheus's own `promtool check metrics`. Only the
# tool is wanted, not a Prometheus server (the package's scripts would add a user and start one):
# the package is unpacked into PROMTOOL_DIR, outside the package system.
PROMTOOL_DIR=/usr/local/lib/weft/prometheus
ensure_promtool() {
  [[ -x "$PROMTOOL_DIR/usr/bin/promtool" ]] && return 0
  local tmp
  tmp=$(mktemp -d)
  chmod 755 "$tmp"  # apt's download user writes here
  (cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null ||
    { ${SUDO:-} apt-get update -qq && apt-get download -qq prometheus; }; })
  ${SUDO:-} mkdir -p "$PROMTOOL_DIR"
  ${SUDO:-} dpkg-deb -x "$tmp"/prometheus_*.deb "$PROMTOOL_DIR"
  rm -rf "$tmp"
  echo "install-deps: promtool in $PROMTOOL_DIR/usr/bin"
}

# weft-learner runs its GEMMs on OpenBLAS, not on the netlib reference BLAS Debian's libtorch
# loads by default: the OpenMP build (libopenblas0-openmp), whose threads are libtorch's own
# OpenMP pool (src/train/blas.h). Installing the package would make it every program's
# libblas.so.3 (an alternative of higher priority), so it is unpacked into OPENBLAS_DIR instead,
# and the learner finds it through its run path (CMakeLists.txt, WEFT_OPENBLAS_DIR). The
# benchmarks' PyTorch anchor takes the pthread build (bench/lib.sh openblas_libdir) by itself.
OPENBLAS_DIR=/usr/local/lib/weft/openblas
ensure_openblas() {
  compgen -G "$OPENBLAS_DIR/usr/lib/*/openblas-openmp/libblas.so.3" >/dev/null && return 0
  local tmp
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && { apt-get download -qq libopenblas0-openmp 2>/dev/null ||
    { ${SUDO:-} apt-get update -qq && apt-get download -qq libopenblas0-openmp; }; })
  ${SUDO:-} mkdir -p "$OPENBLAS_DIR"
  ${SUDO:-} dpkg-deb -x "$tmp"/libopenblas0-openmp_*.deb "$OPENBLAS_DIR"
  rm -rf "$tmp"
  echo "install-deps: OpenBLAS (OpenMP build) in $OPENBLAS_DIR"
}

# npm ci in ui/: uPlot (the dashboard's charts, embedded into weftd by the build) and
# playwright-core (dashboard_test), at the versions ui/package-lock.json pins.
ensure_ui_packages() {
  local ui
  ui="$(cd "$(dirname "$0")/.." && pwd)/ui"
  # node_modules/.weft-lock: the lock file it was installed from
  if cmp -s "$ui/package-lock.json" "$ui/node_modules/.weft-lock" 2>/dev/null; then return 0; fi
  (cd "$ui" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$ui/package-lock.json" "$ui/node_modules/.weft-lock"
  echo "install-deps: npm packages of ui/ installed"
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  ensure_promtool
  ensure_openblas
  ensure_ui_packages
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
ensure_promtool
ensure_openblas
ensure_ui_packages
echo "install-deps: done"
