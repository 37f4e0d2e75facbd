#!/usr/bin/env bats
# The registry's token authentication (docs/SCALE-OUT.md, "Registry
# authentication"): a real docker-registry with `auth: token:`, a token
# server of the test (token_server.py: real RS256 JWTs the registry
# verifies against its rootcertbundle) on 127.0.0.1, both over https with a
# CA of the test, and a real etcd.

load remote_helpers
load gateway_helpers

TOKEN_SERVICE=esbx-registry
TOKEN_ISSUER=esbx-test-issuer

# `start_token_server DIR PORT [OPTIONS]`: token_server.py on PORT with the
# users of DIR/users, its log in DIR/token.log; https with DIR/server.crt
# unless OPTIONS say --plain.
start_token_server() {
  local dir=$1 port=$2 tls scheme=https
  tls=(--tls-cert "$dir/server.crt" --tls-key "$dir/server.key")
  shift 2
  if [ "${1:-}" = --plain ]; then
    tls=() scheme=http
    shift
  fi
  python3 "$BATS_TEST_DIRNAME/token_server.py" --port "$port" --service "$TOKEN_SERVICE" \
    --issuer "$TOKEN_ISSUER" --key "$dir/signing.key" --cert "$dir/signing.crt" \
    --users "$dir/users" --log "$dir/token.log" "${tls[@]}" "$@" >>"$dir/token-server.log" 2>&1 &
  echo $! >"$dir/token-$port.pid"
  local i
  for i in $(seq 1 100); do
    curl -sS -o /dev/null --cacert "$dir/ca.crt" "$scheme://127.0.0.1:$port/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from the token server on $port" >&2
  return 1
}

# `start_token_registry DIR PORT REALM [BUNDLE]`: docker-registry over https
# on PORT whose clients get their tokens from REALM, signed by a certificate
# of BUNDLE (DIR/signing.crt).
start_token_registry() {
  local dir=$1 port=$2 realm=$3 bundle=${4:-$1/signing.crt} i
  mkdir -p "$dir/storage-$port"
  cat >"$dir/registry-$port.yml" <<YAML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/storage-$port
http:
  addr: 127.0.0.1:$port
  tls:
    certificate: $dir/server.crt
    key: $dir/server.key
auth:
  token:
    realm: $realm
    service: $TOKEN_SERVICE
    issuer: $TOKEN_ISSUER
    rootcertbundle: $bundle
YAML
  docker-registry serve "$dir/registry-$port.yml" >>"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry-$port.pid"
  for i in $(seq 1 100); do
    curl -sS -o /dev/null --cacert "$dir/ca.crt" "https://127.0.0.1:$port/v2/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no answer from https://127.0.0.1:$port" >&2
  return 1
}

setup_file() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed"
  command -v etcd >/dev/null || skip "etcd is not installed"
  command -v openssl >/dev/null || skip "openssl is not installed"
  command -v python3 >/dev/null || skip "python3 is not installed"
  REMOTE_DIR=$(mktemp -d /tmp/esbx-remote.XXXXXX)
  ETCD_PORT=$(free_port)
  ETCD_PEER_PORT=$(free_port)
  TOKEN_DIR=$REMOTE_DIR/token
  TOKEN_PORT=$(free_port)
  TREGISTRY_PORT=$(free_port)
  export REMOTE_DIR ETCD_PORT ETCD_PEER_PORT TOKEN_DIR TOKEN_PORT TREGISTRY_PORT
  start_etcd
  make_tls_certs "$TOKEN_DIR"
  # The key tokens are signed with, and its certificate: the registry's
  # rootcertbundle.
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=esbx-token-signer \
    -keyout "$TOKEN_DIR/signing.key" -out "$TOKEN_DIR/signing.crt" 2>/dev/null
  printf '%s\n' esbx:s3cret:pull,push reader:r3ad:pull >"$TOKEN_DIR/users"
  start_token_server "$TOKEN_DIR" "$TOKEN_PORT"
  start_token_registry "$TOKEN_DIR" "$TREGISTRY_PORT" "https://127.0.0.1:$TOKEN_PORT/token"
}

teardown_file() {
  local f
  for f in "$TOKEN_DIR"/*.pid; do
    [ -e "$f" ] && stop_pidfile "$f"
  done
  teardown_remote_services
}

# `token_host NAME TOKEN_LINE`: host NAME using the token registry with the
# token file holding TOKEN_LINE (none when empty).
token_host() {
  local name=$1 line=$2 opts=()
  new_host "$name"
  if [ -n "$line" ]; then
    echo "$line" >"$BATS_TEST_TMPDIR/token-$name"
    opts=(--token-file "$BATS_TEST_TMPDIR/token-$name")
  fi
  on "$name" esbx_ok remote set --registry "$(TOKEN_URL)" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" "${opts[@]}"
}

TOKEN_URL() { echo "https://127.0.0.1:$TREGISTRY_PORT/t$BATS_TEST_NUMBER"; }

setup() {
  etcd_clear
  : >"$TOKEN_DIR/token.log"
  token_host A esbx:s3cret
  make_tree "$BATS_TEST_TMPDIR/src"
  on A "$ESBX" project create p --from "$BATS_TEST_TMPDIR/src" >/dev/null
}

teardown() {
  if [ -n "${ESBXD_PID:-}" ]; then
    kill -TERM "$ESBXD_PID" 2>/dev/null || true
    while kill -0 "$ESBXD_PID" 2>/dev/null; do sleep 0.05; done
  fi
  [ -n "${GW_DIR:-}" ] && rm -rf "$GW_DIR"
  teardown_hosts
}

@test "push, pull and publish through a token realm; a token per scope, asked for once per verb" {
  token_host B esbx:s3cret
  # Without a token the registry refuses, so the realm is really asked.
  run curl -sS -o /dev/null -w '%{http_code}' --cacert "$TOKEN_DIR/ca.crt" \
    "https://127.0.0.1:$TREGISTRY_PORT/v2/"
  assert_output 401
  on A esbx_ok project push p
  # A HEAD of a blob asks for pull, the first upload for pull,push (or
  # push,pull: docker-registry writes the actions in either order); the
  # tokens are kept for the rest of the verb.
  run grep -c . "$TOKEN_DIR/token.log"
  [ "$output" -le 2 ]
  assert_equal "$(grep -cE "user=esbx scope=repository:t$BATS_TEST_NUMBER/p:(pull,push|push,pull) granted=repository:t$BATS_TEST_NUMBER/p:(pull,push|push,pull) status=200" "$TOKEN_DIR/token.log")" 1
  run grep -v '^user=esbx ' "$TOKEN_DIR/token.log"
  assert_output ""
  [ -n "$(etcd_head p)" ]
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  on B make_session p b
  echo token >"$m/token.txt"
  on B esbx_ok publish b
  on A make_session p a
  [ "$(cat "$m/token.txt")" = token ]
}

@test "the realm answering access_token instead of token works too" {
  local port
  port=$(free_port)
  start_token_server "$TOKEN_DIR" "$port" --field access_token
  # Same registry configuration except the realm: a registry of its own.
  local rport
  rport=$(free_port)
  start_token_registry "$TOKEN_DIR" "$rport" "https://127.0.0.1:$port/token"
  on A esbx_ok remote set --registry "https://127.0.0.1:$rport/x" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  on A esbx_ok project push p
  [ -n "$(etcd_head p)" ]
  stop_pidfile "$TOKEN_DIR/registry-$rport.pid"
  stop_pidfile "$TOKEN_DIR/token-$port.pid"
}

@test "a wrong password: one line naming the registry and the realm's refusal, exit 1, nothing changed" {
  token_host B esbx:wrong
  on A esbx_ok remote set --registry "$(TOKEN_URL)" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-B"
  run on A "$ESBX" project push p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "registry \`$(TOKEN_URL)\`"
  assert_output --partial "https://127.0.0.1:$TOKEN_PORT/token"
  assert_output --partial "HTTP 401"
  refute_output --partial wrong
  [ -z "$(etcd_head p)" ]
  [ ! -e "$HOST_A/projects/p/remote" ]
  grep -q "user=esbx .*status=401" "$TOKEN_DIR/token.log"

  on A esbx_ok remote set --registry "$(TOKEN_URL)" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  on A esbx_ok project push p
  : >"$TOKEN_DIR/token.log"
  run on B "$ESBX" project pull p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "registry \`$(TOKEN_URL)\`"
  assert_output --partial "HTTP 401"
  [ ! -e "$HOST_B/projects/p" ]
  # A refused login is final: the read is not tried again (4 times) with
  # the same credentials.
  assert_equal "$(grep -c 'status=401' "$TOKEN_DIR/token.log")" 1
}

@test "a pull-only user pulls; its publish fails with one line, the head and the session stay" {
  local head
  token_host B reader:r3ad
  on A esbx_ok project push p
  head=$(etcd_head p)
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  grep -q "user=reader scope=repository:t$BATS_TEST_NUMBER/p:pull granted=repository:t$BATS_TEST_NUMBER/p:pull status=200" "$TOKEN_DIR/token.log"
  on B make_session p b
  echo mine >"$m/mine.txt"
  run on B "$ESBX" publish b
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "registry \`$(TOKEN_URL)\`"
  assert_output --partial "HTTP 401"
  assert_output --partial "does not grant \`repository:t$BATS_TEST_NUMBER/p:pull,push\` to user \`reader\`"
  [ "$(etcd_head p)" = "$head" ]
  [ "$(cat "$m/mine.txt")" = mine ]
  # The session's work lands once B may push.
  on B esbx_ok remote set --registry "$(TOKEN_URL)" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  on B esbx_ok publish b
  [ "$(etcd_head p)" != "$head" ]
  on A make_session p a
  [ "$(cat "$m/mine.txt")" = mine ]
}

@test "no token file: the realm is asked anonymously; what it refuses fails with one line" {
  token_host B ""
  on A esbx_ok project push p
  run on B "$ESBX" project pull p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "registry \`$(TOKEN_URL)\`"
  assert_output --partial "repository:t$BATS_TEST_NUMBER/p:pull"
  grep -q "user=anonymous scope=repository:t$BATS_TEST_NUMBER/p:pull granted=repository:t$BATS_TEST_NUMBER/p: status=200" "$TOKEN_DIR/token.log"
  [ ! -e "$HOST_B/projects/p" ]
}

@test "credentials go to a plain-http realm of another origin never" {
  local port rport
  port=$(free_port)
  rport=$(free_port)
  start_token_server "$TOKEN_DIR" "$port" --plain
  start_token_registry "$TOKEN_DIR" "$rport" "http://127.0.0.1:$port/token"
  on A esbx_ok remote set --registry "https://127.0.0.1:$rport/x" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  : >"$TOKEN_DIR/token.log"
  run on A "$ESBX" project push p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "registry \`https://127.0.0.1:$rport/x\`"
  assert_output --partial "http://127.0.0.1:$port/token"
  assert_output --partial "https"
  [ ! -s "$TOKEN_DIR/token.log" ]
  [ -z "$(etcd_head p)" ]
  [ ! -e "$HOST_A/projects/p/remote" ]
  stop_pidfile "$TOKEN_DIR/registry-$rport.pid"
  stop_pidfile "$TOKEN_DIR/token-$port.pid"
}

@test "a long-running esbxd keeps its tokens, and asks again when the registry refuses one" {
  local port rport url tok
  port=$(free_port)
  rport=$(free_port)
  url="https://127.0.0.1:$rport/x"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=esbx-token-signer-2 \
    -keyout "$BATS_TEST_TMPDIR/signing2.key" -out "$BATS_TEST_TMPDIR/signing2.crt" 2>/dev/null
  start_token_server "$TOKEN_DIR" "$port"
  start_token_registry "$TOKEN_DIR" "$rport" "https://127.0.0.1:$port/token"
  on A esbx_ok remote set --registry "$url" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  on A esbx_ok project push p
  GW_DIR=$(mktemp -d /tmp/esbx-gw.XXXXXX)
  GW_SOCK=$GW_DIR/gateway.sock GW_LOG=$GW_DIR/esbxd.log METRICS_PORT=$(free_port)
  ESBX_ROOT=$HOST_A start_gateway
  tok=$(ESBX_ROOT=$HOST_A token manage,runtime,observe)
  on A make_session p s1
  echo one >"$m/one.txt"
  : >"$TOKEN_DIR/token.log"
  ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$tok" esbx_ok publish s1
  [ "$(grep -c "user=esbx .*status=200" "$TOKEN_DIR/token.log")" -ge 1 ]
  on A make_session p s2
  echo two >"$m/two.txt"
  : >"$TOKEN_DIR/token.log"
  ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$tok" esbx_ok publish s2
  # The tokens of the first publish served the second.
  [ ! -s "$TOKEN_DIR/token.log" ]

  # A new signing key: the tokens esbxd holds are refused now.
  stop_pidfile "$TOKEN_DIR/registry-$rport.pid"
  stop_pidfile "$TOKEN_DIR/token-$port.pid"
  start_token_server "$TOKEN_DIR" "$port" --key "$BATS_TEST_TMPDIR/signing2.key" \
    --cert "$BATS_TEST_TMPDIR/signing2.crt"
  start_token_registry "$TOKEN_DIR" "$rport" "https://127.0.0.1:$port/token" \
    "$BATS_TEST_TMPDIR/signing2.crt"
  on A make_session p s3
  echo three >"$m/three.txt"
  ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$tok" esbx_ok publish s3
  [ "$(grep -c "user=esbx .*status=200" "$TOKEN_DIR/token.log")" -ge 1 ]
  new_host B
  on B esbx_ok remote set --registry "$url" --etcd "$(ETCD_URL)" \
    --ca "$TOKEN_DIR/ca.crt" --token-file "$BATS_TEST_TMPDIR/token-A"
  on B esbx_ok project pull p
  on B make_session p b
  [ "$(cat "$m/three.txt")" = three ]
  stop_pidfile "$TOKEN_DIR/registry-$rport.pid"
  stop_pidfile "$TOKEN_DIR/token-$port.pid"
}
