# Helpers of the several-hosts suites (80-*): a real OCI registry
# (docker-registry, CNCF distribution 2.8) and a real etcd (3.4) on
# 127.0.0.1, started once per file, and one store per "host".
# shellcheck shell=bash

load helpers

# A TCP port nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() {
  local url=$1 i
  for i in $(seq 1 100); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from $url" >&2
  return 1
}

start_registry() {
  mkdir -p "$REMOTE_DIR/registry"
  cat >"$REMOTE_DIR/registry.yml" <<YAML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $REMOTE_DIR/registry
http:
  addr: 127.0.0.1:$REGISTRY_PORT
YAML
  docker-registry serve "$REMOTE_DIR/registry.yml" >>"$REMOTE_DIR/registry.log" 2>&1 &
  echo $! >"$REMOTE_DIR/registry.pid"
  wait_http "http://127.0.0.1:$REGISTRY_PORT/v2/"
}

stop_registry() {
  local pid
  pid=$(cat "$REMOTE_DIR/registry.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$REMOTE_DIR/registry.pid"
}

start_etcd() {
  etcd --name esbx-test --data-dir "$REMOTE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "esbx-test=http://127.0.0.1:$ETCD_PEER_PORT" >>"$REMOTE_DIR/etcd.log" 2>&1 &
  echo $! >"$REMOTE_DIR/etcd.pid"
  wait_http "http://127.0.0.1:$ETCD_PORT/health"
}

stop_etcd() {
  local pid
  pid=$(cat "$REMOTE_DIR/etcd.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$REMOTE_DIR/etcd.pid"
}

setup_remote_services() {
  REMOTE_DIR=$(mktemp -d /tmp/esbx-remote.XXXXXX)
  REGISTRY_PORT=$(free_port)
  ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  export REMOTE_DIR REGISTRY_PORT ETCD_PORT ETCD_PEER_PORT
  start_registry
  start_etcd
}

teardown_remote_services() {
  stop_registry
  stop_etcd
  rm -rf "$REMOTE_DIR"
}

# Each test its own registry prefix, so that tests share the services but
# no project history.
REGISTRY_URL() { echo "http://127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER"; }
ETCD_URL() { echo "http://127.0.0.1:$ETCD_PORT"; }

# `new_host NAME`: a store root for host NAME with the remote set.
new_host() {
  local root
  root=$(mktemp -d /tmp/esbx-host.XXXXXX)
  eval "HOST_$1=$root"
  echo "$root" >>"$BATS_TEST_TMPDIR/hosts"
  ESBX_ROOT=$root "$ESBX" remote set --registry "$(REGISTRY_URL)" --etcd "$(ETCD_URL)"
}

# `on NAME CMD...`: CMD with ESBX_ROOT of host NAME.
on() {
  local var="HOST_$1"
  shift
  ESBX_ROOT=${!var} "$@"
}

teardown_hosts() {
  local root
  [ -f "$BATS_TEST_TMPDIR/hosts" ] || return 0
  while read -r root; do
    ESBX_ROOT=$root teardown_store
  done <"$BATS_TEST_TMPDIR/hosts"
}

# The head in etcd of project P as its JSON value.
etcd_head() {
  local key
  key=$(printf 'esbx/projects/%s/head' "${1:-p}" | base64 -w0)
  curl -fsS -X POST "$(ETCD_URL)/v3/kv/range" -d "{\"key\":\"$key\"}" |
    jq -r '.kvs[0].value // empty' | base64 -d
}

# Forget every head: the tests share one etcd.
etcd_clear() {
  curl -fsS -o /dev/null -X POST "$(ETCD_URL)/v3/kv/deleterange" \
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

stop_tls_registry() {
  local pid
  pid=$(cat "$1/registry.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$1/registry.pid"
}

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
