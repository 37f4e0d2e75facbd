# shellcheck shell=bash
# A test "internet" of HTTPS APIs, for the suites of the egress proxy
# (93-egress-proxy.bats, 96-gvisor.bats): a net namespace with a veth to
# the host and addresses $INET.2 and $INET.3, HTTPS APIs
# (tests/bats/api_server.py, a certificate from a CA made here) on .2
# (api.test, git.test) and .3 (other.test), HTTP on .2:80 (plain.test), and
# a DNS server on .2 for those names.  What the APIs receive is logged in
# $BATS_FILE_TMPDIR/api.log, one JSON line per request.
#
#   api_inet_up INET NS HOSTLINK    from setup_file
#   api_inet_down                   from teardown_file

api_inet_up() {
  local inet=$1 D=$BATS_FILE_TMPDIR bind
  export API_INET=$inet API_NS=$2 API_HOSTLINK=$3
  ip netns add "$API_NS"
  ip link add "$API_HOSTLINK" type veth peer name inet0 netns "$API_NS"
  ip addr add "$inet.1/24" dev "$API_HOSTLINK"
  ip link set "$API_HOSTLINK" up
  ip -n "$API_NS" addr add "$inet.2/24" dev inet0
  ip -n "$API_NS" addr add "$inet.3/24" dev inet0
  ip -n "$API_NS" link set inet0 up
  ip -n "$API_NS" link set lo up
  ip -n "$API_NS" route add default via "$inet.1"
  # A CA of the test's own, and one certificate for every name.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=esbx test CA" -keyout "$D/ca.key" -out "$D/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=api.test" \
    -keyout "$D/srv.key" -out "$D/srv.csr" 2>/dev/null
  printf 'subjectAltName=DNS:api.test,DNS:git.test,DNS:other.test,IP:%s.2,IP:%s.3\n' \
    "$inet" "$inet" >"$D/san.ext"
  openssl x509 -req -in "$D/srv.csr" -CA "$D/ca.pem" -CAkey "$D/ca.key" -CAcreateserial \
    -days 2 -extfile "$D/san.ext" -out "$D/srv.pem" 2>/dev/null
  mkdir -p "$D/git"
  git init -q --bare "$D/git/repo.git"
  git -C "$D/git/repo.git" config http.receivepack false
  (cd "$D" && git init -q work && cd work && echo hi >f && git add f &&
    git -c user.name=t -c user.email=t@t commit -qm one && git push -q "$D/git/repo.git" HEAD:main) >/dev/null 2>&1
  git -C "$D/git/repo.git" symbolic-ref HEAD refs/heads/main
  : >"$D/api.log"
  for bind in "$inet.2:443:$D/srv.pem:$D/srv.key" "$inet.3:443:$D/srv.pem:$D/srv.key" "$inet.2:80"; do
    ip netns exec "$API_NS" python3 "$ESBX_SRC/tests/bats/api_server.py" "$D/api.log" "$bind" "$D/git" \
      >/dev/null 2>>"$D/api.err" 3>&- &
    echo $! >>"$D/pids"
  done
  ip netns exec "$API_NS" dnsmasq --conf-file=/dev/null --no-hosts --no-resolv \
    --listen-address="$inet.2" --bind-interfaces \
    --address=/api.test/"$inet.2" --address=/git.test/"$inet.2" --address=/plain.test/"$inet.2" \
    --address=/other.test/"$inet.3" --pid-file="$D/dns.pid"
  for _ in $(seq 50); do
    curl -fsS -m 1 --cacert "$D/ca.pem" --resolve "api.test:443:$inet.2" https://api.test/ >/dev/null 2>&1 &&
      curl -fsS -m 1 --cacert "$D/ca.pem" --resolve "other.test:443:$inet.3" https://other.test/ >/dev/null 2>&1 &&
      curl -fsS -m 1 "http://$inet.2/" >/dev/null 2>&1 && break
    sleep 0.1
  done
  : >"$D/api.log"
}

api_inet_down() {
  xargs -r kill <"$BATS_FILE_TMPDIR/pids" 2>/dev/null || true
  [ -f "$BATS_FILE_TMPDIR/dns.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/dns.pid")" 2>/dev/null
  ip link del "$API_HOSTLINK" 2>/dev/null || true
  ip netns del "$API_NS" 2>/dev/null || true
}

# The store's proxy is told to reach the test internet: its upstream
# resolver and CA.
api_inet_upstream() {
  export ESBX_EGRESS_UPSTREAM=$API_INET.2 ESBX_EGRESS_UPSTREAM_CA=$BATS_FILE_TMPDIR/ca.pem
}

# What the APIs received, as JSON lines, for host $1 (Host header).
received() {
  jq -c --arg h "$1" 'select(.host == $h)' "$BATS_FILE_TMPDIR/api.log"
}

# A token of the test's own, in $TOKEN and $BATS_TEST_TMPDIR/token (from
# setup).
api_token() {
  TOKEN=ghp_REAL$$x${RANDOM}t0ken
  printf '%s' "$TOKEN" >"$BATS_TEST_TMPDIR/token"
}

# The secret `api`: api_token's, bound to api.test as a bearer token.
api_secret() {
  esbx_ok secret create api --from-file "$BATS_TEST_TMPDIR/token" --for api.test \
    --header 'Authorization: Bearer {}'
}
