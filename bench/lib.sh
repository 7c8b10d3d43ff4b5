# Helpers shared by the bench scripts: start a weftd on a temp dir and a free port.
BIN="${WEFT_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/bin}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_weftd DATA_DIR [WEFTD_FLAGS...] -> sets WEFTD_PID and WEFT_SERVER
start_weftd() {
  local dir=$1 port
  shift
  port=$(free_port)
  mkdir -p "$dir"
  "$BIN/weftd" --data-dir "$dir" --listen "127.0.0.1:$port" "$@" >>"$dir.weftd.log" 2>&1 &
  WEFTD_PID=$!
  export WEFT_SERVER="127.0.0.1:$port"
  for _ in $(seq 1 100); do
    if curl -fsS "http://$WEFT_SERVER/healthz" >/dev/null 2>&1; then
      # Jobs belong to a tenant: submit as `default` with a token the admin token creates.
      WEFT_TOKEN=$("$BIN/weft" --token "$(cat "$dir/admin.token")" token create default 2>/dev/null)
      export WEFT_TOKEN
      return 0
    fi
    sleep 0.1
  done
  echo "weftd did not start" >&2; cat "$dir.weftd.log" >&2; return 1
}

stop_weftd() { kill "$WEFTD_PID" 2>/dev/null || true; wait "$WEFTD_PID" 2>/dev/null || true; }

# start_pg -> a throwaway PostgreSQL cluster (Debian's newest, in a temporary directory, reached
# through a unix socket only, fsync on as in production; as the postgres user when root: initdb
# refuses root), with one database; its URI in PG_URI. stop_pg stops it and removes it.
PG_DIR=""
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
start_pg() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [[ -n "$bin" ]] || { echo "PostgreSQL is not installed (scripts/install-deps.sh)" >&2; return 1; }
  PG_BIN=$bin
  PG_DIR=$(mktemp -d /tmp/weft-bench-pg-XXXXXX)
  [[ $(id -u) -ne 0 ]] || chown postgres: "$PG_DIR"
  as_pg "$bin/initdb" -D "$PG_DIR/data" -U weft -A trust -E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1
  printf "listen_addresses = ''\nunix_socket_directories = '%s'\nport = 5432\n" "$PG_DIR" \
    >>"$PG_DIR/data/postgresql.conf"
  as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w start >/dev/null
  as_pg "$bin/createdb" -h "$PG_DIR" -U weft weft
  PG_URI="postgresql://weft@/weft?host=$PG_DIR&port=5432"
}
stop_pg() {
  [[ -n "$PG_DIR" ]] || return 0
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
  PG_DIR=""
}

# submit_and_wait MANIFEST_FILE -> prints the job id once the job has ended
submit_and_wait() {
  local out id
  out=$("$BIN/weft" submit "$1") || { echo "$out" >&2; return 1; }
  id=$(echo "$out" | sed -n 's/^job \(job-[^ ]*\) submitted.*/\1/p')
  "$BIN/weft" follow "$id" >/dev/null || true
  echo "$id"
}

# openblas_libdir -> prints a directory holding Debian's OpenBLAS (libopenblas0-pthread) as
# libblas.so.3, the BLAS a PyTorch user would switch to, for LD_LIBRARY_PATH of one command only:
# a copy an earlier scripts/install-deps.sh unpacked for weft-learner (it now unpacks the OpenMP
# build, libopenblas0-openmp), else one downloaded (apt-get download) and unpacked under
# build/openblas. Never installed: that would make it the system's libblas.so.3 for everything.
openblas_libdir() {
  local root arch dir
  arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
  dir="/usr/local/lib/weft/openblas/usr/lib/$arch/openblas-pthread"
  [ -f "$dir/libblas.so.3" ] && { echo "$dir"; return 0; }
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/openblas"
  dir="$root/usr/lib/$arch/openblas-pthread"
  if [ ! -f "$dir/libblas.so.3" ]; then
    mkdir -p "$root"
    (cd "$root" && apt-get download libopenblas0-pthread >/dev/null 2>&1 &&
      dpkg -x libopenblas0-pthread_*.deb .) ||
      { echo "cannot fetch libopenblas0-pthread (apt-get download)" >&2; return 1; }
  fi
  echo "$dir"
}

# torch_blas [LD_LIBRARY_PATH] -> the BLAS library Debian's PyTorch loads for a matrix product
# under that library path (to show the OpenBLAS anchor really ran on OpenBLAS).
torch_blas() {
  LD_LIBRARY_PATH="${1:-}" /usr/bin/python3 -c '
import torch
torch.mm(torch.ones(64, 64), torch.ones(64, 64))
libs = {l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1]}
print(" ".join(sorted(libs)) or "none")'
}
