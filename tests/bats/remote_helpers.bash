# Helpers of the several-hosts suites (80-*): a real OCI registry
# (docker-registry, CNCF distribution 2.8) and a real etcd (3.4) on
# 127.0.0.1, started once per file, and one store per "host".  With
# setup_remote_netns instead of setup_remote_services (81-*), the services
# run in a network namespace of their own and every host in another one,
# reaching them through a veth pair (see below).
# shellcheck shell=bash

load helpers

# CMD in the services' network namespace, if they have one.  (Not for
# daemons started with &: that would fork a subshell whose pid is not the
# daemon's; they use "${SVC_IN[@]}" instead.)
in_svc() {
  svc_in
  "${SVC_IN[@]}" "$@"
}

svc_in() {
  SVC_IN=()
  [ -z "${REMOTE_NETNS:-}" ] || SVC_IN=(nsenter "--net=/run/netns/$REMOTE_NETNS")
}

wait_http() {
  local url=$1 i
  for i in $(seq 1 100); do
    in_svc curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from $url" >&2
  return 1
}

start_registry() {
  mkdir -p "$REMOTE_DIR/registry"
  # Deletes on, as Debian's packaged config has them: a replaced
  # automatic snapshot's manifest is deleted (87-snapshot-push.bats).
  cat >"$REMOTE_DIR/registry.yml" <<YAML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $REMOTE_DIR/registry
  delete:
    enabled: true
http:
  addr: ${REMOTE_ADDR:-127.0.0.1}:$REGISTRY_PORT
YAML
  svc_in
  "${SVC_IN[@]}" docker-registry serve "$REMOTE_DIR/registry.yml" >>"$REMOTE_DIR/registry.log" 2>&1 &
  echo $! >"$REMOTE_DIR/registry.pid"
  wait_http "http://${REMOTE_ADDR:-127.0.0.1}:$REGISTRY_PORT/v2/"
}

# `stop_pidfile FILE`: the process whose pid FILE holds ended (waits until
# it is gone), FILE removed; nothing when there is no FILE.
stop_pidfile() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$1"
}

stop_registry() { stop_pidfile "$REMOTE_DIR/registry.pid"; }

start_etcd() {
  svc_in
  "${SVC_IN[@]}" etcd --name esbx-test --data-dir "$REMOTE_DIR/etcd" \
    --listen-client-urls "http://${REMOTE_ADDR:-127.0.0.1}:$ETCD_PORT" \
    --advertise-client-urls "http://${REMOTE_ADDR:-127.0.0.1}:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "esbx-test=http://127.0.0.1:$ETCD_PEER_PORT" >>"$REMOTE_DIR/etcd.log" 2>&1 &
  echo $! >"$REMOTE_DIR/etcd.pid"
  wait_http "http://${REMOTE_ADDR:-127.0.0.1}:$ETCD_PORT/health"
}

stop_etcd() { stop_pidfile "$REMOTE_DIR/etcd.pid"; }

setup_remote_services() {
  REMOTE_DIR=$(mktemp -d /tmp/esbx-remote.XXXXXX)
  REGISTRY_PORT=$(free_port)
  ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  export REMOTE_DIR REGISTRY_PORT ETCD_PORT ETCD_PEER_PORT
  start_registry
  start_etcd
}

# setup_file of the suites: skipped without the engines, else both up.
setup_remote_file() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed"
  command -v etcd >/dev/null || skip "etcd is not installed"
  setup_remote_services
}

# Every test starts with both services up, whatever the last one did, and
# no head in etcd.
remote_services_up() {
  [ -f "$REMOTE_DIR/registry.pid" ] || start_registry
  [ -f "$REMOTE_DIR/etcd.pid" ] || start_etcd
  etcd_clear
}

# The setup of a test with two hosts: both services up (remote_services_up),
# hosts A and B with the remote set, and project p made on A from
# make_tree's tree (not shared yet).
setup_hosts_ab() {
  remote_services_up
  new_host A
  new_host B
  make_tree "$BATS_TEST_TMPDIR/src"
  on A "$ESBX" project create p --from "$BATS_TEST_TMPDIR/src" >/dev/null
}

teardown_remote_services() {
  stop_registry
  stop_etcd
  rm -rf "$REMOTE_DIR"
}

# Each test its own registry prefix, so that tests share the services but
# no project history.
REGISTRY_URL() { echo "http://${REMOTE_ADDR:-127.0.0.1}:$REGISTRY_PORT/t$BATS_TEST_NUMBER"; }
ETCD_URL() { echo "http://${REMOTE_ADDR:-127.0.0.1}:$ETCD_PORT"; }

# `new_host NAME`: a store root for host NAME with the remote set.
new_host() {
  local root
  root=$(mktemp -d /tmp/esbx-host.XXXXXX)
  eval "HOST_$1=$root"
  echo "$root" >>"$BATS_TEST_TMPDIR/hosts"
  [ -z "${REMOTE_NETNS:-}" ] || new_host_netns "$1"
  ESBX_ROOT=$root "$ESBX" remote set --registry "$(REGISTRY_URL)" --etcd "$(ETCD_URL)"
}

# `on NAME CMD...`: CMD with ESBX_ROOT of host NAME, in its network
# namespace if it has one (a shell function CMD calls "$ESBX", which then
# enters it).
on() {
  local var="HOST_$1" ns="HOSTNS_$1"
  shift
  if [ -z "${!ns:-}" ]; then
    ESBX_ROOT=${!var} "$@"
  elif [ "$(type -t "$1")" = function ]; then
    ESBX_ROOT=${!var} ESBX="$BATS_TEST_TMPDIR/esbx-in-${!ns}" "$@"
  else
    ESBX_ROOT=${!var} nsenter --net="/run/netns/${!ns}" "$@"
  fi
}

teardown_hosts() {
  local root
  [ -f "$BATS_TEST_TMPDIR/hosts" ] || return 0
  stop_host_esbxds
  while read -r root; do
    ESBX_ROOT=$root teardown_store
  done <"$BATS_TEST_TMPDIR/hosts"
  teardown_host_netns
}

# The head in etcd of project P as its JSON value.
etcd_head() {
  local key
  key=$(printf 'esbx/projects/%s/head' "${1:-p}" | base64 -w0)
  in_svc curl -fsS -X POST "$(ETCD_URL)/v3/kv/range" -d "{\"key\":\"$key\"}" |
    jq -r '.kvs[0].value // empty' | base64 -d
}

# Forget every head: the tests share one etcd.
etcd_clear() {
  in_svc curl -fsS -o /dev/null -X POST "$(ETCD_URL)/v3/kv/deleterange" \
    -d "{\"key\":\"$(printf 'esbx/' | base64 -w0)\",\"range_end\":\"$(printf 'esbx0' | base64 -w0)\"}"
}

# `start_tls_registry DIR PORT [HTPASSWD]`: a second registry on 127.0.0.1
# serving https with DIR/server.crt (made by make_tls_certs), with basic
# authentication from HTPASSWD when given; its pid in DIR/registry.pid.
start_tls_registry() {
  local dir=$1 port=$2 htpasswd=${3:-}
  mkdir -p "$dir/storage"
  cat >"$dir/registry.yml" <<YAML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/storage
http:
  addr: 127.0.0.1:$port
  tls:
    certificate: $dir/server.crt
    key: $dir/server.key
YAML
  if [ -n "$htpasswd" ]; then
    cat >>"$dir/registry.yml" <<YAML
auth:
  htpasswd:
    realm: esbx-test
    path: $htpasswd
YAML
  fi
  docker-registry serve "$dir/registry.yml" >>"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  local i
  for i in $(seq 1 100); do
    # 401 without credentials is an answer too.
    curl -sS -o /dev/null --cacert "$dir/ca.crt" "https://127.0.0.1:$port/v2/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from https://127.0.0.1:$port" >&2
  return 1
}

stop_tls_registry() { stop_pidfile "$1/registry.pid"; }

# `make_tls_certs DIR`: a CA (DIR/ca.crt), a server certificate for
# 127.0.0.1 signed by it, and another CA (DIR/other-ca.crt) that did not
# sign it.
make_tls_certs() {
  local dir=$1
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=esbx-test-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=esbx-other-ca \
    -keyout "$dir/other-ca.key" -out "$dir/other-ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
    -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/san.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 1 -extfile "$dir/san.ext" -out "$dir/server.crt" 2>/dev/null
}

# Network namespaces (81-*).  The registry and etcd run in namespace
# esbx-svc-PID on a bridge with address 198.18.81.1/24 (RFC 2544's
# benchmarking range: nothing outside the namespaces the test made has it;
# the namespaces have no route anywhere else); host NAME gets namespace
# esbx-PID-NAME, its end of a veth pair (eth0, 198.18.81.(10+N)) and the
# other end on that bridge.  Processes are started in them with
# `nsenter --net` (not `ip netns exec`, which unshares the mount namespace:
# a session's mounts made inside it would vanish).  teardown_host_netns and
# teardown_remote_netns remove the namespaces, their links and every
# process left in them, pass or fail.
REMOTE_SUBNET=198.18.81

setup_remote_netns() {
  REMOTE_NS_ID=$$
  REMOTE_NETNS=esbx-svc-$REMOTE_NS_ID
  REMOTE_ADDR=$REMOTE_SUBNET.1
  export REMOTE_NS_ID REMOTE_NETNS REMOTE_ADDR
  ip netns add "$REMOTE_NETNS"
  ip -n "$REMOTE_NETNS" link set lo up
  ip -n "$REMOTE_NETNS" link add br0 type bridge
  ip -n "$REMOTE_NETNS" addr add "$REMOTE_ADDR/24" dev br0
  ip -n "$REMOTE_NETNS" link set br0 up
  setup_remote_services
}

teardown_remote_netns() {
  teardown_remote_services
  [ -n "${REMOTE_NETNS:-}" ] || return 0
  kill_netns "$REMOTE_NETNS"
}

# Every process in namespace NS killed, then NS deleted (with its veths).
kill_netns() {
  local pid i
  [ -e "/run/netns/$1" ] || return 0
  for i in $(seq 1 50); do
    pid=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pid" ] || break
    # shellcheck disable=SC2086 # one pid per word
    kill -9 $pid 2>/dev/null || true
    sleep 0.1
  done
  ip netns del "$1"
}

# Host NAME's namespace, link and address; "$ESBX" run in it is
# $BATS_TEST_TMPDIR/esbx-in-NS (see `on`).
new_host_netns() {
  local ns=esbx-$REMOTE_NS_ID-$1 n
  n=$(wc -l <"$BATS_TEST_TMPDIR/hosts")
  eval "HOSTNS_$1=$ns"
  eval "HOSTADDR_$1=$REMOTE_SUBNET.$((10 + n))"
  echo "$ns" >>"$BATS_TEST_TMPDIR/netns"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$REMOTE_NETNS" link add "h$1" type veth peer name eth0 netns "$ns"
  ip -n "$REMOTE_NETNS" link set "h$1" master br0 up
  ip -n "$ns" addr add "$REMOTE_SUBNET.$((10 + n))/24" dev eth0
  ip -n "$ns" link set eth0 up
  printf '#!/bin/sh\nexec nsenter --net=/run/netns/%s %s "$@"\n' "$ns" "$ESBX" >"$BATS_TEST_TMPDIR/esbx-in-$ns"
  chmod +x "$BATS_TEST_TMPDIR/esbx-in-$ns"
}

teardown_host_netns() {
  local ns
  [ -f "$BATS_TEST_TMPDIR/netns" ] || return 0
  while read -r ns; do
    kill_netns "$ns"
  done <"$BATS_TEST_TMPDIR/netns"
  rm -f "$BATS_TEST_TMPDIR/netns"
}

# `start_host_esbxd NAME`: esbxd of host NAME in its namespace (no Docker:
# its plugin socket is a file nobody reads), its gateway socket in
# $GWSOCK_NAME, metrics on 127.0.0.1:9595 of the host's namespace (each
# host has its own loopback); waits until both answer.
start_host_esbxd() {
  local var="HOST_$1" ns="HOSTNS_$1" dir i pid
  dir=$BATS_TEST_TMPDIR/esbxd-$1
  mkdir -p "$dir"
  nsenter --net="/run/netns/${!ns}" setsid "$ESBX_BUILD/volume-plugin/esbxd" --root "${!var}" \
    --plugin-socket "$dir/plugin.sock" --gateway-socket "$dir/gateway.sock" \
    --metrics 127.0.0.1:9595 </dev/null >>"$dir/esbxd.log" 2>&1 &
  pid=$!
  echo "$pid" >>"$BATS_TEST_TMPDIR/esbxds"
  eval "GWSOCK_$1=$dir/gateway.sock"
  for i in $(seq 1 100); do
    if on "$1" curl -fsS -o /dev/null http://127.0.0.1:9595/healthz 2>/dev/null && [ -S "$dir/gateway.sock" ]; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/esbxd.log" >&2
  return 1
}

stop_host_esbxds() {
  local pid i
  [ -f "$BATS_TEST_TMPDIR/esbxds" ] || return 0
  while read -r pid; do
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done <"$BATS_TEST_TMPDIR/esbxds"
  rm -f "$BATS_TEST_TMPDIR/esbxds"
}

# `esbxd_up ROOT DIR LOG [OPTIONS]`: esbxd for the store ROOT, its plugin
# socket in DIR (a file nobody reads: no Docker), no gateway, metrics on a
# free port ($METRICS_PORT), its log appended to LOG; sets $ESBXD_PID and
# waits until it answers.
esbxd_up() {
  local root=$1 dir=$2 log=$3 i=0
  shift 3
  METRICS_PORT=$(free_port)
  setsid "${ESBXD:-$ESBX_BUILD/volume-plugin/esbxd}" --root "$root" --plugin-socket "$dir/plugin.sock" \
    --gateway-socket none --metrics "127.0.0.1:$METRICS_PORT" "$@" </dev/null >>"$log" 2>&1 &
  ESBXD_PID=$!
  until curl -sf "http://127.0.0.1:$METRICS_PORT/healthz" >/dev/null 2>&1; do
    kill -0 "$ESBXD_PID" 2>/dev/null || fail "esbxd exited: $(cat "$log")"
    i=$((i + 1))
    [ $i -lt 100 ] || fail "esbxd does not answer"
    sleep 0.1
  done
}
