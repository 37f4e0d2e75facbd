# Helpers for the gateway suites (50-53): each test runs its own esbxd with
# its own store, plugin socket, gateway socket and metrics port, and
# teardown_gateway stops it and removes everything, pass or fail.

load helpers

setup_gateway() {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  setup_store
  GW_DIR=$(mktemp -d /tmp/esbx-gw.XXXXXX)
  GW_SOCK=$GW_DIR/gateway.sock
  GW_LOG=$GW_DIR/esbxd.log
  METRICS_PORT=$(free_port)
  ESBXD_PID=
  export GW_DIR GW_SOCK GW_LOG METRICS_PORT
  start_gateway "$@"
}

start_gateway() {
  setsid "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "${GW_PLUGIN_SOCK:-$GW_DIR/plugin.sock}" \
    --gateway-socket "$GW_SOCK" --metrics "127.0.0.1:$METRICS_PORT" "$@" \
    </dev/null >>"$GW_LOG" 2>&1 &
  ESBXD_PID=$!
  local i=0
  until curl -sf "http://127.0.0.1:$METRICS_PORT/healthz" >/dev/null 2>&1 && [ -S "$GW_SOCK" ]; do
    kill -0 "$ESBXD_PID" 2>/dev/null || { cat "$GW_LOG" >&2; return 1; }
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "esbxd does not answer" >&2; return 1; }
    sleep 0.1
  done
}

teardown_gateway() {
  esbxd_log_if_failed "${GW_LOG:-}"
  esbxd_down
  [ -n "${GW_DIR:-}" ] && rm -rf "$GW_DIR"
  [ -n "${GW_PLUGIN_SOCK:-}" ] && rm -f "$GW_PLUGIN_SOCK"
  teardown_store
}

# The default hooks of the gateway suites, in place of helpers.bash's; a
# suite that needs more defines its own after `load`.
setup() { setup_gateway "$@"; }
teardown() { teardown_gateway; }

# A token: `token SCOPES [--project P] [--session S] [--ttl D]`.
token() {
  local scope=$1
  shift
  # ESBX comes from helpers.bash.
  # shellcheck disable=SC2153
  "$ESBX" token create --scope "$scope" "$@" 2>/dev/null
}

# `gw METHOD PATH TOKEN [BODY]`: sets $http_code and $output (the body).
# TOKEN "-" sends no Authorization header.
gw() {
  local method=$1 path=$2 tok=$3 body=${4-}
  local args=(-s -X "$method" --unix-socket "$GW_SOCK" -w '\n%{http_code}')
  [ "$tok" != - ] && args+=(-H "Authorization: Bearer $tok")
  [ $# -ge 4 ] && args+=(--data-binary "$body")
  local out
  out=$(curl "${args[@]}" "http://esbx$path")
  http_code=${out##*$'\n'}
  output=${out%$'\n'*}
}

assert_http() {
  [ "$http_code" = "$1" ] || { echo "HTTP $http_code, wanted $1: $output" >&2; return 1; }
}

# `gw_expect CODE METHOD PATH TOKEN [BODY]`: gw, then assert_http CODE.
gw_expect() {
  local want=$1
  shift
  gw "$@"
  assert_http "$want"
}

# A CA and a certificate it signed for 127.0.0.1 and localhost, made with
# openssl in $BATS_TEST_TMPDIR/tls: ca.crt, server.crt, server.key.
make_certs() {
  local d=$BATS_TEST_TMPDIR/tls
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=esbx test CA" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 1 -extfile "$d/ext.cnf" -out "$d/server.crt" 2>/dev/null
  TLS=$d
}

# Everything a refused request must leave as it was.
store_state() {
  "$ESBX" project list
  for p in $("$ESBX" project list | tail -n +2 | cut -f1); do "$ESBX" project log "$p"; done
  # Not AGE, IDLE and EXPIRES: they move with the clock and with use.
  "$ESBX" session list | cut -f1-4
  for s in $("$ESBX" session list | tail -n +2 | cut -f1); do "$ESBX" diff "$s"; done
  find "$ESBX_ROOT/projects" | sort
}

# A project "demo" and a session of it with one change.
make_demo() {
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  esbx_ok session create demo --name s1
  echo changed >"$ESBX_ROOT/sessions/s1/merged/README"
}
