#!/usr/bin/env bats
# esbxd under socket activation (contrib/systemd/esbxd.socket): the sockets
# exist before esbxd runs, a request waits for it instead of failing, and
# the sockets outlive it.  systemd-socket-activate passes listening sockets
# exactly as systemd does (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES).

load gateway_helpers

setup() {
  command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate is not installed"
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  setup_store
  GW_DIR=$(mktemp -d /tmp/esbx-sa.XXXXXX)
  GW_SOCK=$GW_DIR/gateway.sock
  GW_LOG=$GW_DIR/esbxd.log
  PLUGIN_SOCK=$GW_DIR/plugin.sock
  METRICS_PORT=$(free_port)
  ESBXD_PID=
}

teardown() { teardown_gateway; }

# `activate`: the service manager listens on the plugin socket, the
# gateway socket and the metrics port, and starts esbxd on the first
# connection; nothing runs esbxd before that.
activate() {
  setsid systemd-socket-activate \
    -l "$PLUGIN_SOCK" --fdname=plugin -l "$GW_SOCK" --fdname=gateway \
    -l "127.0.0.1:$METRICS_PORT" --fdname=metrics \
    "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$PLUGIN_SOCK" \
    --gateway-socket "$GW_SOCK" --metrics "127.0.0.1:$METRICS_PORT" "$@" \
    </dev/null >>"$GW_LOG" 2>&1 &
  ESBXD_PID=$!
  local i=0
  until [ -S "$PLUGIN_SOCK" ] && [ -S "$GW_SOCK" ]; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the service manager made no sockets: $(cat "$GW_LOG")"
    sleep 0.05
  done
}

@test "socket activation: a request sent before esbxd runs is answered by it" {
  activate
  run grep -c "serving store" "$GW_LOG"
  assert_output 0
  run curl -sf --max-time 10 --unix-socket "$PLUGIN_SOCK" -X POST http://esbx/Plugin.Activate
  assert_success
  assert_output '{"Implements":["VolumeDriver"]}'
  grep -q "serving store" "$GW_LOG"
  # The same process took the gateway and the metrics sockets over.
  gw GET /v1/projects -
  assert_equal "$http_code" 401
  run curl -sf --max-time 5 "http://127.0.0.1:$METRICS_PORT/healthz"
  assert_success
  # Passed sockets are not esbxd's to remove: after it stops they stay for
  # the next start.
  kill -TERM "$ESBXD_PID"
  wait "$ESBXD_PID" || true
  ESBXD_PID=
  assert [ -S "$PLUGIN_SOCK" ]
  assert [ -S "$GW_SOCK" ]
  run grep -c "matches no listener" "$GW_LOG"
  assert_output 0
}

@test "socket activation: a passed socket no listener uses is closed with a warning" {
  activate --gateway-socket none
  run curl -sf --max-time 10 --unix-socket "$PLUGIN_SOCK" -X POST http://esbx/Plugin.Activate
  assert_success
  run grep "matches no listener" "$GW_LOG"
  assert_success
  [ "${#lines[@]}" -eq 1 ]
  # Nobody answers on the gateway socket now: refused at once, not hung.
  run curl -s --max-time 5 --unix-socket "$GW_SOCK" http://esbx/v1/projects
  assert_failure
}

@test "LISTEN_FDS meant for another process is ignored: esbxd makes its own sockets" {
  LISTEN_PID=1 LISTEN_FDS=3 setsid "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$PLUGIN_SOCK" \
    --gateway-socket "$GW_SOCK" --metrics "127.0.0.1:$METRICS_PORT" </dev/null >>"$GW_LOG" 2>&1 &
  ESBXD_PID=$!
  local i=0
  until curl -sf "http://127.0.0.1:$METRICS_PORT/healthz" >/dev/null 2>&1; do
    kill -0 "$ESBXD_PID" 2>/dev/null || fail "esbxd ended: $(cat "$GW_LOG")"
    i=$((i + 1))
    [ $i -lt 100 ] || fail "esbxd does not answer"
    sleep 0.1
  done
  run curl -sf --unix-socket "$PLUGIN_SOCK" -X POST http://esbx/Plugin.Activate
  assert_success
}
