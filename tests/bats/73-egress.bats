#!/usr/bin/env bats
# --network egress: a session reaches the destinations of its allow-list and
# nothing else.  The "internet" is a net namespace this suite makes: a veth
# to the host with addresses of 198.19.233.0/24 (a benchmarking range), an
# HTTP server on .2 (ports 8080 and 8081) and .3, and a DNS server answering
# a.test (.2), b.test (.3), x.wild.test (.2) and rebind.test (10.254.233.2,
# a private address of the namespace's loopback).  169.254.169.254 and
# 10.254.233.2 are routed into it too, so that a packet the policy let
# through would land there, never on a real network.

# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

INET=198.19.233

setup_file() {
  export NS=esbxt-inet-$$ HOSTLINK=esbxt-h$$
  ip netns add "$NS"
  ip link add "$HOSTLINK" type veth peer name inet0 netns "$NS"
  ip addr add "$INET.1/24" dev "$HOSTLINK"
  ip link set "$HOSTLINK" up
  ip -n "$NS" addr add "$INET.2/24" dev inet0
  ip -n "$NS" addr add "$INET.3/24" dev inet0
  ip -n "$NS" addr add 169.254.169.254/32 dev lo
  ip -n "$NS" addr add 10.254.233.2/32 dev lo
  ip -n "$NS" link set inet0 up
  ip -n "$NS" link set lo up
  ip -n "$NS" route add default via "$INET.1"
  ip route add 169.254.169.254/32 via "$INET.2" dev "$HOSTLINK"
  ip route add 10.254.233.2/32 via "$INET.2" dev "$HOSTLINK"
  mkdir -p "$BATS_FILE_TMPDIR/www"
  echo "hello from the test internet" >"$BATS_FILE_TMPDIR/www/index.html"
  for port in 8080 8081; do
    ip netns exec "$NS" python3 -m http.server "$port" --bind 0.0.0.0 \
      --directory "$BATS_FILE_TMPDIR/www" >/dev/null 2>&1 3>&- &
    echo $! >>"$BATS_FILE_TMPDIR/pids"
  done
  ip netns exec "$NS" dnsmasq --conf-file=/dev/null --no-hosts --no-resolv \
    --listen-address="$INET.2" --bind-interfaces \
    --address=/a.test/"$INET.2" --address=/b.test/"$INET.3" \
    --address=/x.wild.test/"$INET.2" --address=/rebind.test/10.254.233.2 --pid-file="$BATS_FILE_TMPDIR/dns.pid"
  # A service of the host itself, on every address and on loopback only.
  python3 -m http.server 18089 --bind 0.0.0.0 --directory "$BATS_FILE_TMPDIR/www" \
    >/dev/null 2>&1 3>&- &
  echo $! >>"$BATS_FILE_TMPDIR/pids"
  python3 -m http.server 18090 --bind 127.0.0.1 --directory "$BATS_FILE_TMPDIR/www" \
    >/dev/null 2>&1 3>&- &
  echo $! >>"$BATS_FILE_TMPDIR/pids"
  for _ in $(seq 50); do
    curl -fsS -m 1 "http://$INET.2:8080/" >/dev/null 2>&1 &&
      curl -fsS -m 1 "http://$INET.2:8081/" >/dev/null 2>&1 &&
      curl -fsS -m 1 "http://127.0.0.1:18090/" >/dev/null 2>&1 && break
    sleep 0.1
  done
}

teardown_file() {
  xargs -r kill <"$BATS_FILE_TMPDIR/pids" 2>/dev/null || true
  [ -f "$BATS_FILE_TMPDIR/dns.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/dns.pid")" 2>/dev/null
  ip route del 169.254.169.254/32 via "$INET.2" dev "$HOSTLINK" 2>/dev/null || true
  ip route del 10.254.233.2/32 via "$INET.2" dev "$HOSTLINK" 2>/dev/null || true
  ip link del "$HOSTLINK" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}

setup() {
  setup_project
  export ESBX_EGRESS_UPSTREAM=$INET.2
}

teardown() { teardown_store; }

# The slot of session $1's network (from inspect), or nothing.
egress_link() {
  "$ESBX" session inspect "$1" | jq -r '.egress.link // empty'
}

fetch() {
  local s=$1 url=$2
  run "$ESBX" exec "$s" -- curl -fsS -m 3 "$url"
}

# The same, straight to the address: a program that ignores the proxy.
fetch_direct() {
  local s=$1 url=$2
  run "$ESBX" exec "$s" -- curl -fsS -m 3 --noproxy '*' "$url"
}

# The pid of the store's egress proxy, once it runs.
proxy_pid() {
  local f p
  for f in /run/esbx/egress/proxy/*/ports.json; do
    [ "$(jq -r .store "$f" 2>/dev/null)" = "$ESBX_ROOT" ] || continue
    p=$(jq -r .pid "$f")
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--store $ESBX_ROOT " && echo "$p"
  done
  return 0
}

@test "the test internet answers the host (control)" {
  run curl -fsS -m 3 "http://$INET.3:8080/"
  assert_success
  run curl -fsS -m 3 "http://169.254.169.254:8080/"
  assert_output "hello from the test internet"
  run curl -fsS -m 3 "http://10.254.233.2:8080/"
  assert_output "hello from the test internet"
}

@test "egress: an allowed name resolves and answers on its port; other names, ports and addresses are refused" {
  esbx_ok session create p --name s1 --network egress --allow a.test:8080 --allow '*.wild.test'
  esbx_ok exec s1 -- cat /etc/resolv.conf
  assert_output --partial "nameserver 10.233."
  fetch s1 http://a.test:8080/
  assert_success
  assert_output "hello from the test internet"
  # The port of the rule only.
  fetch s1 http://a.test:8081/
  assert_failure
  # Only allowed names resolve.
  esbx_fails 2 exec s1 -- getent hosts b.test
  esbx_fails 2 exec s1 -- getent hosts example.org
  # A wildcard allows the subdomains.
  fetch s1 http://x.wild.test:8081/
  assert_success
  # An address nobody allowed, through the proxy and straight.
  fetch s1 "http://$INET.3:8080/"
  assert_failure
  fetch_direct s1 "http://$INET.3:8080/"
  assert_failure
  # An allowed name's address, straight: names go through the proxy only.
  fetch_direct s1 "http://$INET.2:8080/"
  assert_failure
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.allow == ["a.test:8080", "*.wild.test"]'
  echo "$output" | jq -e --arg d "$INET.3" \
    '.egress.refused | any(.destination == $d and .port == 8080 and .protocol == "tcp")'
  echo "$output" | jq -e --arg d "$INET.2" \
    '.egress.refused | any(.destination == $d and .port == 8080)'
  echo "$output" | jq -e --arg d "$INET.3" \
    '.egress.requests | any(.host == $d and .port == 8080 and .verdict == "refused" and .status == 403)'
  echo "$output" | jq -e \
    '.egress.requests | any(.host == "a.test" and .port == 8081 and .verdict == "refused")'
  echo "$output" | jq -e \
    '.egress.requests | any(.host == "a.test" and .port == 8080 and .method == "GET" and .path == "/" and .status == 200 and .verdict == "allowed")'
  # Refused attempts and requests become events.
  esbx_ok events s1 --json
  assert_output --partial '"type":"egress.refused"'
  echo "$output" | grep egress.refused | grep -q "\"destination\":\"$INET.3\""
  echo "$output" | jq -se --arg d "$INET.3" \
    'any(.type == "egress.request" and .host == $d and .verdict == "refused")'

}

@test "egress: names the resolver refuses become egress.refused_name events, once each" {
  esbx_ok session create p --name s1 --network egress --allow a.test:8080
  esbx_fails 2 exec s1 -- getent hosts b.test
  esbx_ok exec s1 -- getent hosts a.test
  esbx_ok events s1 --json
  echo "$output" | jq -se 'map(select(.type == "egress.refused_name")) | length == 1
    and .[0].name == "b.test" and .[0].queries >= 1 and .[0].total == .[0].queries'
  # Read once: a second reading records nothing new.
  esbx_ok events s1 --json
  [ "$(echo "$output" | grep -c egress.refused_name)" = 1 ]
  esbx_fails 2 exec s1 -- getent hosts example.org
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.refused_names | map(.name) == ["b.test", "example.org"]'
  # Teardown reads what is left.
  esbx_fails 2 exec s1 -- getent hosts c.test
  esbx_ok session stop s1
  esbx_ok events s1 --json
  echo "$output" | jq -se 'map(select(.type == "egress.refused_name") | .name) == ["b.test", "example.org", "c.test"]'
}

@test "egress: a project's default network and allow-list apply to sessions that name none" {
  esbx_ok project network p --allow a.test:8080
  esbx_ok project network p
  echo "$output" | jq -e '. == {"network": "egress", "allow": ["a.test:8080"]}'
  esbx_ok session create p --name s1
  esbx_ok session inspect s1
  echo "$output" | jq -e '.network == "egress" and .egress.allow == ["a.test:8080"]'
  fetch s1 http://a.test:8080/
  assert_success
  assert_output "hello from the test internet"
  fetch s1 "http://$INET.3:8080/"
  assert_failure
  # A session's own choice wins: its network, its allow-list.
  esbx_ok session create p --name s2 --network none
  "$ESBX" session inspect s2 | jq -e '.network == "none" and .egress == null'
  esbx_ok session create p --name s3 --allow "$INET.3:8080"
  "$ESBX" session inspect s3 | jq -e --arg a "$INET.3:8080" '.network == "egress" and .egress.allow == [$a]'
  # Bad defaults are refused and change nothing.
  esbx_fails 2 project network p --network host --allow a.test
  assert_output --partial "egress"
  esbx_fails 2 project network p --allow 'bad_name!'
  esbx_fails 2 project network p --network bogus
  run "$ESBX" project network nope --allow a.test
  assert_failure
  assert_output --partial "nope"
  esbx_ok project network p
  echo "$output" | jq -e '. == {"network": "egress", "allow": ["a.test:8080"]}'
  # --network none: no defaults.
  esbx_ok project network p --network none
  esbx_ok session create p --name s4
  "$ESBX" session inspect s4 | jq -e '.network == "none"'
}

@test "egress: addresses and CIDRs, with and without a port" {
  esbx_ok session create p --name s1 --network egress --allow "$INET.2" --allow "$INET.3/32:8081"
  fetch s1 "http://$INET.2:8080/"
  assert_success
  fetch s1 "http://$INET.2:8081/"
  assert_success
  fetch s1 "http://$INET.3:8081/"
  assert_success
  fetch s1 "http://$INET.3:8080/"
  assert_failure
  # No name is allowed: none resolves.
  esbx_fails 2 exec s1 -- getent hosts a.test
}

@test "egress: the host's services, other sessions and the metadata address are unreachable" {
  esbx_ok session create p --name s1 --network egress --allow 0.0.0.0/0
  esbx_ok session create p --name s2 --network egress --allow "$INET.2"
  esbx_ok exec --detach s2 -- python3 -m http.server 8000 --bind 0.0.0.0
  esbx_ok exec s1 -- true
  s1=$("$ESBX" session inspect s1 | jq -r .egress.address)
  gw1=$("$ESBX" session inspect s1 | jq -r .egress.resolver)
  s2=$("$ESBX" session inspect s2 | jq -r .egress.address)
  [ -n "$s2" ]
  [ "$s2" != null ]
  [ "$s1" != "$s2" ]
  # Everything on the allow-list (0.0.0.0/0) is reachable, straight and
  # through the proxy...
  fetch s1 "http://$INET.3:8080/"
  assert_success
  fetch_direct s1 "http://$INET.3:8080/"
  assert_success
  # ...but not the host: its address on the session's link or on another.
  for f in fetch fetch_direct; do
    $f s1 "http://$gw1:18089/"
    assert_failure
    $f s1 "http://$INET.1:18089/"
    assert_failure
  done
  # Loopback is the session's own.
  fetch s1 "http://127.0.0.1:18090/"
  assert_failure
  # Not the other session, though it listens (its own loopback answers).
  for _ in $(seq 30); do
    "$ESBX" exec s2 -- curl -fsS -m 1 -o /dev/null --noproxy '*' http://127.0.0.1:8000/ && break
    sleep 0.2
  done
  for f in fetch fetch_direct; do
    $f s1 "http://$s2:8000/"
    assert_failure
    # Not the metadata address, which the host itself reaches (the control test).
    $f s1 "http://169.254.169.254:8080/"
    assert_failure
  done
  esbx_ok session inspect s1
  for d in "$gw1" "$INET.1" "$s2" 169.254.169.254; do
    echo "$output" | jq -e --arg d "$d" '.egress.refused | any(.destination == $d)'
    echo "$output" | jq -e --arg d "$d" '.egress.requests | any(.host == $d and .verdict == "refused")'
  done
}

@test "egress: discard removes the link, the table, the slot, and the proxy once no session needs it" {
  esbx_ok session create p --name s1 --network egress --allow a.test
  esbx_ok exec s1 -- true
  link=$(egress_link s1)
  [ -n "$link" ]
  ip link show "$link"
  nft_names_link "$link"
  dns=$(proxy_pid)
  [ -n "$dns" ]
  grep -qa esbx-proxy "/proc/$dns/cmdline"
  esbx_ok discard s1 --force
  run ip link show "$link"
  assert_failure
  run nft_names_link "$link"
  assert_failure
  wait_gone "$dns" 20
  assert_file_not_exists "/run/esbx/egress/${link#esbxe}.json"
}

@test "egress: after the holder is killed, gc removes what it left" {
  esbx_ok session create p --name s1 --network egress --allow a.test
  esbx_ok exec s1 -- true
  link=$(egress_link s1)
  slot=${link#esbxe}
  dns=$(proxy_pid)
  [ -n "$dns" ]
  kill -9 "$(holder_pid s1)"
  wait_gone "$(holder_pid s1)"
  nft_names_link "$link"
  esbx_ok gc
  run nft_names_link "$link"
  assert_failure
  run ip link show "$link"
  assert_failure
  wait_gone "$dns" 20
  assert_file_not_exists "/run/esbx/egress/$slot.json"
  # The session itself is kept: the next exec gets a network again.
  fetch s1 http://a.test:8080/
  assert_success
}

@test "egress: a session's start runs no nft and reads nothing of other sessions (set elements over netlink)" {
  command -v strace >/dev/null || skip "strace is not installed"
  # gVisor's sandbox is runsc, which traces its own children (ptrace
  # platform) and does not start under strace -f; its start adds the
  # same elements through the same code.
  skip_gvisor "runsc does not start under strace -f"
  esbx_ok session create p --name s1 --network egress --allow a.test
  esbx_ok exec s1 -- true
  esbx_ok session create p --name s2 --network egress --allow "$INET.3"
  # strace follows the holder, which stays: stopped (it detaches) once
  # the exec returned.
  strace -f -qq -I1 -e trace=execve -o "$BATS_TEST_TMPDIR/trace" "$ESBX" exec s2 -- true &
  tracer=$!
  for _ in $(seq 100); do
    grep -q '+++ exited with 0 +++' "$BATS_TEST_TMPDIR/trace" 2>/dev/null &&
      [ "$(head -n1 "$BATS_TEST_TMPDIR/trace" | cut -d' ' -f1)" = \
        "$(grep '+++ exited with 0 +++' "$BATS_TEST_TMPDIR/trace" | head -n1 | cut -d' ' -f1)" ] && break
    sleep 0.1
  done
  kill "$tracer"
  wait "$tracer" || true
  grep -q 'execve(".*esbx-holder"' "$BATS_TEST_TMPDIR/trace"
  run grep -c 'execve("[^"]*/nft"' "$BATS_TEST_TMPDIR/trace"
  assert_output 0
  nft_names_link "$(egress_link s2)"
  fetch s2 "http://$INET.3:8080/"
  assert_success
}

@test "egress: the number of networks is limited, with a clear error" {
  export ESBX_EGRESS_MAX=1
  esbx_ok session create p --name s1 --network egress
  esbx_ok session create p --name s2 --network egress
  esbx_ok exec s1 -- true
  run "$ESBX" exec s2 -- true
  assert_failure
  assert_output --partial "all 1 egress networks are in use"
  # The failed start holds no network.
  [ -z "$(egress_link s2)" ]
  esbx_ok discard s1 --force
  esbx_ok exec s2 -- true
}

@test "egress: bad allow-lists are refused and change nothing" {
  esbx_fails 2 session create p --name s1 --allow a.test
  assert_output --partial "only a session with --network egress"
  esbx_fails 2 session create p --name s1 --network egress --allow 'a.test:99999'
  assert_output --partial "port"
  esbx_fails 2 session create p --name s1 --network egress --allow '10.0.0.0/33'
  esbx_fails 2 session create p --name s1 --network egress --allow 'bad_name!'
  esbx_fails 2 session create p --name s1 --network egress --allow '[::1]:80'
  esbx_fails 2 session create p --name s1 --network bogus
  run "$ESBX" session list
  refute_output --partial s1
}

@test "egress: a Docker volume's session takes -o network=egress -o allow=A,B (plugin socket, no dockerd)" {
  sock=$BATS_TEST_TMPDIR/plugin.sock
  pid=$("$ESBX_SRC/hack/start-esbxd" --root "$ESBX_ROOT" --plugin-socket "$sock" \
    --log "$BATS_TEST_TMPDIR/esbxd.log" -- --gateway-socket none --metrics none)
  run curl -s --unix-socket "$sock" -X POST --data-binary \
    '{"Name": "v1", "Opts": {"project": "p", "network": "egress", "allow": "a.test:8080,198.19.233.3:8081"}}' \
    http://plugin/VolumeDriver.Create
  kill "$pid"
  assert_output '{}'
  esbx_ok session inspect v1
  echo "$output" | jq -e '.network == "egress" and .egress.allow == ["a.test:8080", "198.19.233.3:8081"]'
  fetch v1 http://a.test:8080/
  assert_success
  fetch v1 "http://$INET.3:8081/"
  assert_success
  fetch v1 "http://$INET.3:8080/"
  assert_failure
}

# Send DNS queries for distinct names to the session's resolver for $2
# seconds from inside session $1; prints how many were sent.
dns_flood() {
  "$ESBX" exec "$1" -- python3 -c '
import socket, struct, sys, time
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
end, i = time.time() + float(sys.argv[1]), 0
while time.time() < end:
    q = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0)
    for label in (b"q%d" % i, b"flood", b"test"):
        q += bytes([len(label)]) + label
    q += b"\0" + struct.pack(">HH", 1, 1)
    try:
        s.sendto(q, (ns, 53))
    except BlockingIOError:
        time.sleep(0.001)
        continue
    i += 1
print(i)
' "$2"
}

@test "egress: a query flood is rate limited and the resolver's log stays bounded" {
  esbx_ok session create p --name s1 --network egress --allow a.test:8080
  esbx_ok exec s1 -- true
  slot=$(egress_link s1)
  slot=${slot#esbxe}
  run dns_flood s1 4
  assert_success
  sent=$output
  [ "$sent" -gt 10000 ]
  log=/run/esbx/egress/$slot.log
  size=$(stat -c %s "$log")
  echo "$sent queries sent, the log holds $size bytes" >&3
  # 4 s of flood at the limit (200 queries/s, 1000 at once) is ~2,000
  # queries, ~200 KiB of log; the log can never pass 2 MiB anyway.
  [ "$size" -le $((2 * 1024 * 1024)) ]
  # What inspect shows is kept: the refused names, and the queries the
  # limit dropped.
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.refused_names | length > 100'
  echo "$output" | jq -e '.egress.refused_names | all(.name | test("^q[0-9]+\\.flood\\.test$"))'
  echo "$output" | jq -e --argjson n "$sent" '.egress.dns_limited > 0 and .egress.dns_limited < $n'
  esbx_ok events s1 --json
  echo "$output" | jq -se 'map(select(.type == "egress.dns_limited")) | length == 1 and .[0].packets > 0'
  # Allowed names still resolve once the flood is over.
  fetch s1 http://a.test:8080/
  assert_success
  # The resolver never writes its log past 2 MiB, and a full log stops
  # neither it nor the names refused after the next reading.
  dns=$(proxy_pid)
  [ -n "$dns" ]
  head -c $((2 * 1024 * 1024 - $(stat -c %s "$log") - 100)) /dev/zero | tr '\0' x >>"$log"
  esbx_fails 2 exec s1 -- getent hosts lost.test
  [ "$(stat -c %s "$log")" -le $((2 * 1024 * 1024)) ]
  kill -0 "$dns"
  esbx_ok events s1 --json
  echo "$output" | jq -se 'map(select(.type == "egress.resolver_log_full")) | length == 1'
  esbx_fails 2 exec s1 -- getent hosts after.test
  # (Past the 1024 names whose totals inspect keeps: an event still.)
  esbx_ok events s1 --json
  echo "$output" | jq -se 'any(.type == "egress.refused_name" and .name == "after.test")'
}

# The refused sets are shared by every egress session of the host: one
# session's flood of new destinations fills its own room (4096 at once),
# never the others'.  Session $1 sends one UDP packet to each of $2 ports
# of $INET.2, none allowed.
refused_flood() {
  "$ESBX" exec "$1" -- python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for p in range(20000, 20000 + int(sys.argv[2])):
    try:
        s.sendto(b"x", (sys.argv[1], p))
    except OSError:
        pass
' "$INET.2" "$2"
}

@test "egress: one session's flood of refused destinations fills its own room in the shared sets, not the others'" {
  esbx_ok session create p --name s1 --network egress --allow a.test
  esbx_ok session create p --name s2 --network egress --allow a.test
  esbx_ok exec s2 -- true
  run refused_flood s1 6000
  assert_success
  esbx_ok session inspect s1
  n=$(echo "$output" | jq '[.egress.refused[] | select(.protocol == "udp")] | length')
  echo "s1: $n refused destinations counted of 6000" >&3
  [ "$n" -ge 4000 ]
  [ "$n" -le 4200 ]
  # A destination already counted is counted again.
  run refused_flood s1 1
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.refused[] | select(.port == 20000) | .packets >= 2'
  # s2's refusals are counted as ever.
  run refused_flood s2 3
  esbx_ok session inspect s2
  echo "$output" | jq -e '[.egress.refused[] | select(.protocol == "udp")] | length == 3'
  # Its thousands of elements go with it (one transaction).
  link=$(egress_link s1)
  esbx_ok discard s1 --force
  run nft_names_link "$link"
  assert_failure
  assert_file_not_exists "/run/esbx/egress/${link#esbxe}.json"
}

@test "egress: an allowed name that resolves into a private range is refused unless the range is allowed (DNS rebinding)" {
  esbx_ok session create p --name s1 --network egress --allow rebind.test:8080
  esbx_ok exec s1 -- getent hosts rebind.test
  assert_output --partial 10.254.233.2
  fetch s1 http://rebind.test:8080/
  assert_failure
  fetch_direct s1 http://10.254.233.2:8080/
  assert_failure
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.refused | any(.destination == "10.254.233.2" and .port == 8080)'
  echo "$output" | jq -e '.egress.requests | any(.host == "rebind.test" and .verdict == "refused" and (.reason | test("rebinding")))'
  # Named by the allow-list itself, the range is reachable, through the
  # name too.
  esbx_ok session create p --name s2 --network egress --allow rebind.test:8080 \
    --allow 10.254.233.0/24:8080
  fetch s2 http://rebind.test:8080/
  assert_success
  assert_output "hello from the test internet"
  # A public answer is unaffected.
  esbx_ok session create p --name s3 --network egress --allow a.test:8080
  fetch s3 http://a.test:8080/
  assert_success
}
