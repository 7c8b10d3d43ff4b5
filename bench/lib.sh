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

stop_weftd() { kill "$WEFTD_PID" 2>/dev/null; wait "$WEFTD_PID" 2>/dev/null || true; }

# submit_and_wait MANIFEST_FILE -> prints the job id once the job has ended
submit_and_wait() {
  local out id
  out=$("$BIN/weft" submit "$1") || { echo "$out" >&2; return 1; }
  id=$(echo "$out" | sed -n 's/^job \(job-[^ ]*\) submitted.*/\1/p')
  "$BIN/weft" follow "$id" >/dev/null || true
  echo "$id"
}
