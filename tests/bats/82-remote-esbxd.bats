#!/usr/bin/env bats
# esbxd and the remote (docs/SCALE-OUT.md, "esbxd"): --registry/--etcd and
# their config file keys, the etcd watch that prefetches a shared project's
# new layers on a host without any CLI call there, and etcd over TLS with
# client certificates.  esbxd runs without Docker (its plugin socket in a
# temp dir, no dockerd), registry and etcd as in 80-remote.bats.

load remote_helpers


setup_file() {
  setup_remote_file
}

teardown_file() {
  teardown_remote_services
}

setup() {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  ESBXD_PID=
  D_DIR=$(mktemp -d /tmp/esbx-d.XXXXXX)
  D_LOG=$D_DIR/esbxd.log
  : >"$D_DIR/esbxd.conf"
  setup_hosts_ab
}

teardown() {
  esbxd_log_if_failed "${D_LOG:-}"
  esbxd_down
  [ -n "${TLS_ETCD_PID:-}" ] && kill "$TLS_ETCD_PID" 2>/dev/null
  while [ -n "${TLS_ETCD_PID:-}" ] && kill -0 "$TLS_ETCD_PID" 2>/dev/null; do sleep 0.05; done
  teardown_hosts
  rm -rf "$D_DIR"
}

# `esbxd_for HOST [OPTIONS]`: esbxd for host HOST's store, its config
# file $D_DIR/esbxd.conf, no gateway, metrics on a free port.
esbxd_for() {
  local var="HOST_$1"
  shift
  esbxd_up "${!var}" "$D_DIR" "$D_LOG" --config "$D_DIR/esbxd.conf" "$@"
}

# `wait_for SECONDS CMD...`: until CMD succeeds, at most SECONDS.
wait_for() {
  local limit=$(($1 * 10)) i=0
  shift
  until "$@"; do
    i=$((i + 1))
    [ $i -lt $limit ] || return 1
    sleep 0.1
  done
}

# Whether host H's stack of p ends with layer ID.
stack_top_is() {
  local var="HOST_$1"
  [ "$(tail -n 1 "${!var}/projects/p/stack" 2>/dev/null)" = "$2" ]
}

# Publish on A with a session named by the file.
publish_a() {
  on A make_session p "$1"
  echo "$1" >"$m/$1.txt"
  on A esbx_ok publish "$1"
  top=$(tail -n 1 "$HOST_A/projects/p/stack")
}

log_has() { grep -q -- "$1" "$D_LOG"; }

metric() {
  curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

@test "esbxd --registry/--etcd: a publish on host A is in B's stack within seconds, no call on B" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  # The daemon's options are B's only remote.
  rm "$HOST_B/remote.json"
  esbxd_for B --registry "$(REGISTRY_URL)" --etcd "$(ETCD_URL)"
  wait_for 10 log_has "watching" || fail "no watch: $(cat "$D_LOG")"
  local t0 t1
  publish_a one
  t0=$(date +%s%N)
  wait_for 10 stack_top_is B "$top" || fail "B's stack: $(cat "$HOST_B/projects/p/stack")"
  t1=$(date +%s%N)
  echo "in B's stack $(((t1 - t0) / 1000000)) ms after A's publish returned" >&3
  [ -d "$HOST_B/projects/p/layers/$top/diff" ]
  [ "$(grep -c "prefetched 1 layer of project \`p\`" "$D_LOG")" -eq 1 ]
  [ "$(metric esbx_remote_prefetched_layers_total)" = 1 ]
  # The next session on B starts from the prefetched layer, nothing fetched.
  ESBX_REGISTRY=$(REGISTRY_URL) ESBX_ETCD=$(ETCD_URL) on B make_session p b
  [ "$(cat "$m/one.txt")" = one ]
  publish_a two
  wait_for 10 stack_top_is B "$top"
  [ "$(metric esbx_remote_prefetched_layers_total)" = 2 ]
  on B esbx_ok fsck p
}

@test "esbxd syncs every shared project once at start, the remote from remote.json" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  publish_a before
  # A local project of B is left alone.
  on B esbx_ok project create local --from "$BATS_TEST_TMPDIR/src"
  esbxd_for B
  wait_for 10 stack_top_is B "$top" || fail "not synced at start: $(cat "$D_LOG")"
  [ ! -e "$HOST_B/projects/local/remote" ]
  run grep -c "prefetched" "$D_LOG"
  assert_output 1
}

@test "etcd restarted under a watching esbxd: the watch reconnects from its revision" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  esbxd_for B
  wait_for 10 log_has "watching" || fail "no watch"
  stop_etcd
  wait_for 10 log_has "etcd watch.*127.0.0.1:$ETCD_PORT" || fail "no warning: $(cat "$D_LOG")"
  start_etcd
  # Published before the watch is back: only the revision it resumes from
  # brings this one.
  publish_a during
  wait_for 15 stack_top_is B "$top" || fail "not prefetched after the restart: $(cat "$D_LOG")"
  publish_a after
  wait_for 10 stack_top_is B "$top" || fail "not prefetched: $(cat "$D_LOG")"
  # One warning for the outage, not one per attempt.
  [ "$(grep -c "etcd watch" "$D_LOG")" -le 2 ]
}

@test "esbxd stops promptly on SIGTERM while watching, and while etcd is down" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  local t0 t1 pid
  esbxd_for B
  wait_for 10 log_has "watching" || fail "no watch"
  pid=$ESBXD_PID
  t0=$(date +%s%N)
  kill -TERM "$pid"
  wait_for 5 eval "! kill -0 $pid 2>/dev/null" || fail "esbxd still runs"
  t1=$(date +%s%N)
  echo "stopped in $(((t1 - t0) / 1000000)) ms" >&3
  [ $(((t1 - t0) / 1000000)) -lt 2000 ]
  ESBXD_PID=

  stop_etcd
  esbxd_for B
  wait_for 10 log_has "etcd watch" || fail "no warning"
  pid=$ESBXD_PID
  t0=$(date +%s%N)
  kill -TERM "$pid"
  wait_for 5 eval "! kill -0 $pid 2>/dev/null" || fail "esbxd still runs"
  t1=$(date +%s%N)
  echo "stopped in $(((t1 - t0) / 1000000)) ms with etcd down" >&3
  [ $(((t1 - t0) / 1000000)) -lt 2000 ]
  ESBXD_PID=
}

@test "registry and etcd keys of esbxd.conf, read again on SIGHUP; bad URLs refused" {
  local dead
  dead=$(free_port)
  on A esbx_ok project push p
  on B esbx_ok project pull p
  rm "$HOST_B/remote.json"
  printf 'registry = %s\netcd = http://127.0.0.1:%s\n' "$(REGISTRY_URL)" "$dead" >"$D_DIR/esbxd.conf"
  esbxd_for B
  wait_for 10 log_has "127.0.0.1:$dead" || fail "no warning naming the etcd URL: $(cat "$D_LOG")"
  publish_a hup
  printf 'registry = %s\netcd = %s\n' "$(REGISTRY_URL)" "$(ETCD_URL)" >"$D_DIR/esbxd.conf"
  kill -HUP "$ESBXD_PID"
  wait_for 10 stack_top_is B "$top" || fail "not synced after SIGHUP: $(cat "$D_LOG")"
  # A bad value on SIGHUP is logged; the settings in force stay.
  printf 'etcd = ftp://x\n' >"$D_DIR/esbxd.conf"
  kill -HUP "$ESBXD_PID"
  wait_for 10 log_has "ftp://x" || fail "no warning: $(cat "$D_LOG")"
  publish_a kept
  wait_for 10 stack_top_is B "$top" || fail "the watch went: $(cat "$D_LOG")"

  run "$ESBXD" --root "$HOST_B" --etcd ftp://x --config "$D_DIR/esbxd.conf"
  assert_failure 2
  assert_output --partial "--etcd"
  run "$ESBXD" --help
  assert_output --partial "--registry URL"
  assert_output --partial "--etcd URL"
}

# `start_tls_etcd DIR PORT`: etcd serving https with DIR/server.crt and
# asking clients for a certificate signed by DIR/ca.crt.
start_tls_etcd() {
  local dir=$1 port=$2 i
  etcd --name esbx-tls --data-dir "$dir/etcd" \
    --listen-client-urls "https://127.0.0.1:$port" --advertise-client-urls "https://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$3" --initial-advertise-peer-urls "http://127.0.0.1:$3" \
    --initial-cluster "esbx-tls=http://127.0.0.1:$3" \
    --cert-file "$dir/server.crt" --key-file "$dir/server.key" \
    --client-cert-auth --trusted-ca-file "$dir/ca.crt" >>"$dir/etcd.log" 2>&1 &
  TLS_ETCD_PID=$!
  for i in $(seq 1 100); do
    curl -fsS -o /dev/null --cacert "$dir/ca.crt" --cert "$dir/client.crt" --key "$dir/client.key" \
      "https://127.0.0.1:$port/health" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$dir/etcd.log" >&2
  return 1
}

@test "etcd over TLS with client certificates: push, pull, publish, watch; no certificate fails naming the URL" {
  command -v openssl >/dev/null || skip "openssl is not installed"
  local tls=$BATS_TEST_TMPDIR/tls port url h
  make_tls_certs "$tls"
  openssl req -newkey rsa:2048 -nodes -subj /CN=esbx-host \
    -keyout "$tls/client.key" -out "$tls/client.csr" 2>/dev/null
  openssl x509 -req -in "$tls/client.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
    -CAcreateserial -days 1 -out "$tls/client.crt" 2>/dev/null
  port=$(free_port)
  start_tls_etcd "$tls" "$port" "$(free_port)"
  url="https://127.0.0.1:$port"
  for h in A B; do
    on "$h" esbx_ok remote set --registry "$(REGISTRY_URL)" --etcd "$url" \
      --ca "$tls/ca.crt" --cert "$tls/client.crt" --key "$tls/client.key"
  done
  on A esbx_ok project push p
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  on B make_session p b
  echo tls >"$m/tls.txt"
  on B esbx_ok publish b
  on A make_session p a
  [ "$(cat "$m/tls.txt")" = tls ]
  # esbxd watches through the same certificates.
  esbxd_for B
  wait_for 10 log_has "watching" || fail "no watch: $(cat "$D_LOG")"
  publish_a overtls
  wait_for 10 stack_top_is B "$top" || fail "not prefetched: $(cat "$D_LOG")"

  # Without the client certificate: one line naming etcd's URL and the
  # cause, nothing changed.
  new_host C
  on C esbx_ok remote set --registry "$(REGISTRY_URL)" --etcd "$url" --ca "$tls/ca.crt"
  run on C "$ESBX" project pull p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "$url"
  assert_output --partial "client certificate"
  [ ! -e "$HOST_C/projects/p" ]
  on A make_session p nocert
  echo x >"$m/nocert.txt"
  cp "$HOST_A/projects/p/stack" "$BATS_TEST_TMPDIR/stack.before"
  on A esbx_ok remote set --registry "$(REGISTRY_URL)" --etcd "$url" --ca "$tls/ca.crt"
  run on A "$ESBX" publish nocert
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "$url"
  cmp "$HOST_A/projects/p/stack" "$BATS_TEST_TMPDIR/stack.before"
  [ -f "$(on A "$ESBX" session path nocert)/nocert.txt" ]
}

# Whether `esbx session create` of p on host H, named NAME, connects to
# etcd's port (strace: the connect calls).
# Whether esbxd holds the watch's lock on HOST's remote.watch (it lets it
# go while it syncs a head, after the stack file is written).
watch_marked() {
  local var="HOST_$1" ino
  ino=$(stat -c %i "${!var}/remote.watch" 2>/dev/null) || return 1
  grep -qE "FLOCK +ADVISORY +WRITE .*:$ino " /proc/locks
}

create_asks_etcd() {
  local var="HOST_$1"
  ESBX_ROOT=${!var} strace -f -qq -e trace=connect -o "$BATS_TEST_TMPDIR/strace" \
    "$ESBX" session create p --name "$2" >/dev/null
  grep -q "sin_port=htons($ETCD_PORT)" "$BATS_TEST_TMPDIR/strace"
}

@test "with esbxd's watch connected, a session create trusts the stack it keeps and asks etcd nothing" {
  command -v strace >/dev/null || skip "strace is not installed"
  on A esbx_ok project push p
  on B esbx_ok project pull p
  # Without a watch the create reads the head in etcd itself.
  create_asks_etcd B s0
  esbxd_for B
  wait_for 10 log_has "watching" || fail "no watch: $(cat "$D_LOG")"
  wait_for 5 test -s "$HOST_B/remote.watch"
  publish_a one
  wait_for 10 stack_top_is B "$top" || fail "B's stack: $(cat "$HOST_B/projects/p/stack")"
  wait_for 5 watch_marked B || fail "the watch did not take its lock again: $(cat /proc/locks)"
  run create_asks_etcd B s1
  assert_failure
  m=$(on B "$ESBX" session path s1)
  [ "$(cat "$m/one.txt")" = one ]
  # Another etcd URL than the one watched: asked again.
  ESBX_ETCD="http://localhost:$ETCD_PORT" create_asks_etcd B s2
  # The watch gone (esbxd stopped), the lock goes with it.
  esbxd_down
  create_asks_etcd B s3
  [ "$(on B "$ESBX" session list | grep -c '^s[0-9]')" -eq 4 ]
}

@test "a watch whose sync fails lets creates ask etcd themselves" {
  command -v strace >/dev/null || skip "strace is not installed"
  on A esbx_ok project push p
  on B esbx_ok project pull p
  # esbxd's registry is one nobody answers: its syncs fail, the CLI's work.
  esbxd_for B --registry "http://127.0.0.1:$(free_port)/t$BATS_TEST_NUMBER"
  wait_for 10 log_has "watching" || fail "no watch: $(cat "$D_LOG")"
  wait_for 5 test -s "$HOST_B/remote.watch"
  run create_asks_etcd B s0
  assert_failure
  publish_a one
  wait_for 10 log_has "a head could not be synced" || fail "no failed sync: $(cat "$D_LOG")"
  create_asks_etcd B s1
  m=$(on B "$ESBX" session path s1)
  [ "$(cat "$m/one.txt")" = one ]
}
