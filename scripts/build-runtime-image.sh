#!/usr/bin/env bash
# Builds weft's runtime image offline from Debian's packages: mmdebstrap makes a minimal Debian 12
# root file system with python3, python3-torch and the libraries weft-learner and weft-ps load
# (read off the built binaries), and podman imports it as localhost/weft/runtime:latest. Every
# learner of a built-in or TorchScript job runs on it (its binary mounted from the build), and so
# does every command job that names no image of its own. No registry is involved: the packages
# come from the host's apt sources, and those already in the host's apt cache are not fetched
# again.
#
#   scripts/build-runtime-image.sh [BIN_DIR]     BIN_DIR: where weft-learner is (build/bin)
#
# Idempotent: an image built from the same package list (name and version of each) is kept.
# WEFT_RUNTIME_IMAGE names another image; WEFT_IMAGE_PACKAGES adds packages (space-separated).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR="${1:-${WEFT_BUILD_DIR:-build}/bin}"
IMAGE="${WEFT_RUNTIME_IMAGE:-localhost/weft/runtime:latest}"
SUITE=bookworm

for tool in mmdebstrap podman dpkg-query; do
  command -v "$tool" >/dev/null || { echo "build-runtime-image: $tool is missing (scripts/install-deps.sh)"; exit 1; }
done
for bin in weft-learner weft-ps; do
  [[ -x "$BIN_DIR/$bin" ]] || { echo "build-runtime-image: $BIN_DIR/$bin is not built (scripts/build.sh)"; exit 1; }
done

# The packages: what a command job's program expects (python3 and Debian's torch, tar to unpack
# its code), and the package of every library the binaries load that is not weft's own.
packages=(python3 python3-torch tar gzip ca-certificates)
mapfile -t libs < <(for bin in weft-learner weft-ps; do ldd "$BIN_DIR/$bin"; done |
                    awk '$3 ~ /^\// && $3 !~ /^\/usr\/local\// {print $3}' | sort -u)
# Each library by its path, the file it resolves to and its /usr path (a merged /usr host
# registers either): one dpkg-query for all of them.
mapfile -t names < <(for lib in "${libs[@]}"; do echo "$lib"; readlink -f "$lib"; echo "/usr$lib"; done | sort -u)
mapfile -t found < <(dpkg-query -S "${names[@]}" 2>/dev/null | cut -d: -f1 | tr ',' '\n' | tr -d ' ' | sort -u)
packages+=("${found[@]}")
# OpenBLAS's own dependencies (OpenBLAS is mounted from the host: train/blas.h).
packages+=(libgomp1 libgfortran5)
# shellcheck disable=SC2206
packages+=(${WEFT_IMAGE_PACKAGES:-})
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

# The image's identity: each package at the version the host has (the binaries were linked
# against those), and this script.
versions=$(dpkg-query -W -f='${Package}=${Version}\n' "${packages[@]}" 2>/dev/null | sort)
digest=$(printf '%s\n%s\n' "$versions" "$(sha256sum "$0")" | sha256sum | cut -c1-16)
export CONTAINERS_CONF="${CONTAINERS_CONF:-/dev/null}"
if [[ "$(podman image inspect --format '{{index .Labels "weft.packages"}}' "$IMAGE" 2>/dev/null)" == "$digest" ]]; then
  echo "build-runtime-image: $IMAGE is up to date ($digest)"
  exit 0
fi

# The host's apt sources (deb822 or one-line), so the image has exactly the host's packages.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -s "$f" ]] && grep -qv '^\s*#' "$f" && sources+=("$f")
done
[[ ${#sources[@]} -gt 0 ]] || sources=("http://deb.debian.org/debian")

work=$(mktemp -d /var/tmp/weft-image-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build-runtime-image: ${#packages[@]} packages -> $IMAGE (mmdebstrap, about 2-5 minutes)"
start=$SECONDS
# The host's cached .deb files are hard-linked into the new root's cache first (same file
# system) or copied, so apt fetches only what the host has not got.
mmdebstrap --variant=minbase --quiet \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives"; for d in /var/cache/apt/archives/*.deb; do [ -e "$d" ] && { ln "$d" "$1/var/cache/apt/archives/" 2>/dev/null || cp "$d" "$1/var/cache/apt/archives/"; }; done; true' \
  --include="$(IFS=,; echo "${packages[*]}")" \
  "$SUITE" "$work/rootfs.tar" "${sources[@]}"
echo "build-runtime-image: root file system $(du -h "$work/rootfs.tar" | cut -f1) in $((SECONDS - start)) s; importing"
podman import --quiet \
  --change "LABEL weft.packages=$digest" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$work/rootfs.tar" "$IMAGE" >/dev/null
echo "build-runtime-image: $IMAGE built ($digest) in $((SECONDS - start)) s"
