#!/usr/bin/env bats
# Many egress sessions at once through the store's one proxy and resolver:
# each resolves a name and fetches from the test server, then all go and
# nothing is left (links, tables, slot records, holders, the proxy).
# ESBX_EGRESS_SCALE sessions, 30 by default (under half a minute on 2
# cores; 200 take about two and a half); hack/bench/egress runs 1,000.  The server is in a net namespace this
# suite makes (198.19.235.0/24), the only name scale.test.

load helpers

INET=198.19.235

setup_file() {
  export NS=esbxt-sc-$$ HOSTLINK=esbxt-s$$ D=$BATS_FILE_TMPDIR
  ip netns add "$NS"
  ip link add "$HOSTLINK" type veth peer name inet0 netns "$NS"
  ip addr add "$INET.1/24" dev "$HOSTLINK"
  ip link set "$HOSTLINK" up
  ip -n "$NS" addr add "$INET.2/24" dev inet0
  ip -n "$NS" link set inet0 up
  ip -n "$NS" link set lo up
  ip -n "$NS" route add default via "$INET.1"
  : >"$D/api.log"
  ip netns exec "$NS" python3 "$ESBX_SRC/tests/bats/api_server.py" "$D/api.log" "$INET.2:80" \
    >/dev/null 2>&1 3>&- &
  echo $! >"$D/pids"
  ip netns exec "$NS" dnsmasq --conf-file=/dev/null --no-hosts --no-resolv \
    --listen-address="$INET.2" --bind-interfaces --address=/scale.test/"$INET.2" \
    --pid-file="$D/dns.pid"
  for _ in $(seq 50); do
    curl -fsS -m 1 "http://$INET.2/" >/dev/null 2>&1 && break
    sleep 0.1
  done
  : >"$D/api.log"
}

teardown_file() {
  xargs -r kill <"$BATS_FILE_TMPDIR/pids" 2>/dev/null || true
  [ -f "$BATS_FILE_TMPDIR/dns.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/dns.pid")" 2>/dev/null
  ip link del "$HOSTLINK" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}

setup() {
  setup_project
  export ESBX_EGRESS_UPSTREAM=$INET.2
}

teardown() { teardown_store; }

# The slots (N of /run/esbx/egress/N.json) that belong to this store.
our_slots() {
  grep -l "\"$ESBX_ROOT\"" /run/esbx/egress/[0-9]*.json 2>/dev/null |
    sed 's|.*/\([0-9]*\)\.json|\1|' || true
}

@test "egress at scale: many sessions resolve and fetch through one proxy, then nothing is left" {
  n=${ESBX_EGRESS_SCALE:-30}
  for i in $(seq "$n"); do
    "$ESBX" session create p --name "e$i" --network egress --allow scale.test:80 >/dev/null
  done
  # Each first exec starts the holder and its network.
  seq "$n" | xargs -P 4 -I{} "$ESBX" exec e{} -- sh -c \
    'getent hosts scale.test >/dev/null && curl -fsS -m 20 -o /dev/null http://scale.test/e{}' \
    >"$BATS_TEST_TMPDIR/out" 2>&1 || { tail -20 "$BATS_TEST_TMPDIR/out"; false; }
  [ "$(jq -r .path "$BATS_FILE_TMPDIR/api.log" | grep -c '^/e[0-9]*$')" = "$n" ]
  slots=$(our_slots)
  [ "$(echo "$slots" | wc -l)" = "$n" ]
  # One proxy for the store, no resolver of a session's own.
  # (Other stores' proxies may run beside it.)
  pids=$(for f in /run/esbx/egress/proxy/*/ports.json; do
    if [ "$(jq -r .store "$f")" = "$ESBX_ROOT" ]; then jq -r .pid "$f"; fi
  done)
  [ "$(echo "$pids" | wc -w)" = 1 ]
  ! pgrep -f "dnsmasq.*esbx/egress" >/dev/null
  echo "$n sessions; proxy RSS $(awk '/VmRSS/ {print $2, $3}' "/proc/$pids/status")" >&3
  seq "$n" | xargs -P 4 -I{} "$ESBX" discard e{} --force >/dev/null
  [ -z "$(our_slots)" ]
  for s in $slots; do
    ! ip link show "esbxe$s" >/dev/null 2>&1
    ! nft list ruleset | grep -qF "\"esbxe$s\""
  done
  [ -z "$(ls "$ESBX_ROOT/sessions")" ]
  wait_gone "$pids" 20
}
