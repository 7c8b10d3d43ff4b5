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
  # command jobs run the tenant's program in bubblewrap's sandbox (setpriv is util-linux's)
  bubblewrap util-linux
  # tls_test makes a self-signed certificate
  openssl
)
# scripts/lint-openapi.sh: Node.js and npm for Redocly CLI (Debian's, unless a node is present).
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi
# Optional: the PyTorch reference for bench/ (not needed to build or test).
if [[ "${WEFT_WITH_BENCH_DEPS:-0}" == "1" ]]; then
  PACKAGES+=(python3-numpy wrk)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
