#!/usr/bin/env bats
# The gVisor tier: session create --isolation gvisor runs the session in a
# runsc sandbox (shim/lib/gvisor.c).  The boundary suite runs under it too
# (ESBX_TEST_ISOLATION=gvisor, .ci/run).

load helpers
load api_inet_helpers

# The test internet of the egress tests (api_inet_helpers.bash): HTTPS APIs
# on .2 (api.test) and .3, HTTP on .2:80 (plain.test), a resolver on .2.
INET=198.19.235

setup_file() { api_inet_up "$INET" "esbxt-gv-$$" "esbxt-g$$"; }

teardown_file() { api_inet_down; }

setup() {
  need_runsc
  setup_project
  api_inet_upstream
  api_token
  esbx_ok session create p --name g1 --isolation gvisor
}

# The sandbox processes of session S: runsc-sandbox and runsc-gofer with
# its container id.
sandbox_procs() {
  local id
  id=$(jq -r '.gvisor.id // empty' "$ESBX_ROOT/sessions/$1/holder.json" 2>/dev/null) || return 0
  [ -n "$id" ] || return 0
  pgrep -f -- "runsc-(sandbox|gofer).* $id\$" || true
}

@test "gvisor: commands run in gVisor's kernel, as root of its own, in the session cgroup" {
  esbx_ok session inspect g1
  assert_output --partial '"isolation": "gvisor"'
  esbx_ok exec g1 -- uname -r
  [ "$output" = 4.4.0 ]
  [ "$output" != "$(uname -r)" ]
  esbx_ok exec g1 -- dmesg
  assert_output --partial "Starting gVisor"
  esbx_ok exec g1 -- id -u
  assert_output 0
  # The sandbox is the holder, in the session cgroup with its gofer.
  pid=$(holder_pid g1)
  run tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial runsc-sandbox
  cg=$(jq -r .cgroup "$ESBX_ROOT/sessions/g1/holder.json")
  grep -qx "$pid" /sys/fs/cgroup/"$cg"/cgroup.procs 2>/dev/null ||
    grep -qx "$pid" /sys/fs/cgroup/pids/"$cg"/cgroup.procs
  esbx_ok ps g1
  assert_output --partial runsc
}

@test "gvisor: exit status, stdio, env, cwd, --user and events as in the namespaces tier" {
  run "$ESBX" exec g1 -- sh -c 'exit 7'
  assert_failure 7
  run "$ESBX" exec g1 -- sh -c 'kill -TERM $$'
  assert_failure 143
  run "$ESBX" exec --env A=1 --cwd /workspace/src g1 -- sh -c 'read x; echo "$x $A $(pwd)"; echo err >&2' <<<"in"
  assert_success
  assert_line "in 1 /workspace/src"
  assert_line err
  esbx_ok exec --user 1000:1000 g1 -- sh -c 'id -u; id -g; echo "$HOME"'
  assert_output $'1000\n1000\n/tmp'
  # runsc's own status and message for a missing program (not 127).
  run "$ESBX" exec g1 -- no-such-program
  assert_failure 128
  assert_output --partial 'error finding executable "no-such-program"'
  esbx_fails 2 exec -t g1 -- true
  assert_output --partial 'gVisor sandbox: exec --tty'
  run "$ESBX" events g1 --json
  assert_output --partial '"exit_status":7'
  # Detached commands outlive the caller.
  esbx_ok exec -d g1 -- sh -c 'sleep 1; echo late >/workspace/late'
  wait_log "$ESBX_ROOT/sessions/g1/upper/late" '^late$' 60
  esbx_ok exec g1 -- cat /workspace/late
  assert_output late
}

@test "gvisor: what the sandbox writes is published with its owners; a build works" {
  command -v cc >/dev/null || skip "no C compiler on this host"
  esbx_ok exec g1 -- sh -c 'cd /workspace && printf "int main (void) { return 3; }\n" >t.c && cc -o t t.c; ./t; echo $? >rc; mkdir app && echo x >app/f && chown -R 1000:1000 app'
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/g1/upper/rc" "$ESBX_ROOT/sessions/g1/upper/app/f"
  assert_output $'0:0\n1000:1000'
  esbx_ok diff g1
  assert_output --partial 'A /rc'
  esbx_ok publish g1
  head=$(head_of)
  run cat "$ESBX_ROOT/projects/p/layers/$head/diff/rc"
  assert_output 3
}

@test "gvisor: secrets reach the sandbox as files and env, not the host's argv" {
  printf 'gv-secret-value\n' | "$ESBX" secret create tok
  esbx_ok session create p --name g2 --isolation gvisor --secret tok,env=TOK,file=/run/secrets/tok
  # Output is redacted as in the namespaces tier: compare digests (the
  # value is kept without its newline).
  want=$(printf 'gv-secret-value' | sha256sum | cut -c1-64)
  esbx_ok exec g2 -- sh -c 'sha256sum </run/secrets/tok | cut -c1-64; printf %s "$TOK" | sha256sum | cut -c1-64'
  assert_output "$want"$'\n'"$want"
  esbx_ok exec -d g2 -- sleep 30
  run pgrep -af runsc
  refute_output --partial gv-secret-value
  run "$ESBX" exec g2 -- sh -c 'echo x >/run/secrets/tok'
  assert_failure
}

@test "gvisor: a secret the proxy puts in is a placeholder in the sandbox, whatever its network" {
  api_secret
  esbx_ok session create p --name gp --isolation gvisor --secret api,inject,env=API_TOKEN,file=/run/secrets/api
  esbx_ok exec gp -- printenv API_TOKEN
  ph=$output
  [[ $ph == esbx-placeholder-* ]]
  # Digests: output is redacted of the session's secret values.
  esbx_ok exec gp -- sh -c 'sha256sum </run/secrets/api | cut -c1-64'
  [ "$output" = "$(printf %s "$ph" | sha256sum | cut -c1-64)" ]
}

@test "gvisor: the network is gVisor's loopback by default; --network host is the host's" {
  esbx_ok exec g1 -- cat /proc/net/dev
  assert_output --partial 'lo:'
  refute_output --partial 'eth0'
  refute_output --partial "$API_HOSTLINK"
  esbx_ok session create p --name gh --isolation gvisor --network host
  esbx_ok exec gh -- cat /proc/net/dev
  assert_output --partial "$API_HOSTLINK:"
  esbx_ok exec gh -- curl -fsS -m 5 "http://$INET.2/from-host-net"
  received "$INET.2" | jq -se 'any(.path == "/from-host-net")'
  "$ESBX" session inspect gh | jq -e '.network == "host"'
  [ "$(jq -r .network "$ESBX_ROOT/sessions/gh/holder.json")" = host ]
  esbx_fails 2 session create p --name g3 --isolation maybe
  assert_output --partial 'invalid --isolation `maybe`'
}

# The link of session $1's egress network (from inspect).
egress_objects() {
  link=$("$ESBX" session inspect "$1" | jq -r '.egress.link // empty')
  [ -n "$link" ]
}

@test "gvisor: egress goes through the store's proxy and allow-list; the kernel rules hold underneath" {
  esbx_ok session create p --name ge --isolation gvisor --network egress \
    --allow plain.test:80 --allow "$INET.3:443"
  esbx_ok exec ge -- uname -r
  assert_output 4.4.0
  # Names through the store's resolver, on the session's gateway.
  esbx_ok exec ge -- cat /etc/resolv.conf
  assert_output --partial "nameserver 10.233."
  esbx_ok exec ge -- getent hosts plain.test
  assert_output --partial "$INET.2"
  esbx_fails 2 exec ge -- getent hosts api.test
  # Through the proxy (HTTP_PROXY), to an allowed name.
  esbx_ok exec ge -- curl -fsS -m 10 http://plain.test/via-proxy
  received plain.test | jq -se 'any(.path == "/via-proxy")'
  # Through the proxy, a name not allowed: refused there.
  run "$ESBX" exec ge -- curl -fsS -m 10 https://api.test/refused
  assert_failure
  # An address entry, straight; a program that ignores the proxy and goes
  # to any other address is refused by the table.
  esbx_ok exec ge -- curl -fsS -m 10 -k --noproxy '*' "https://$INET.3/direct-allowed"
  run "$ESBX" exec ge -- curl -fsS -m 5 --noproxy '*' "http://$INET.2/direct-refused"
  assert_failure
  run "$ESBX" exec ge -- python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=5)' "$INET.2"
  assert_failure
  run jq -r .path "$BATS_FILE_TMPDIR/api.log"
  assert_output --partial /direct-allowed
  refute_output --partial /direct-refused
  refute_output --partial /refused
  # What the other tiers show of it: inspect, events.
  esbx_ok session inspect ge
  echo "$output" | jq -e '.network == "egress" and .egress.allow == ["plain.test:80", "'"$INET"'.3:443"]'
  echo "$output" | jq -e --arg d "$INET.2" '.egress.refused | any(.destination == $d and .port == 80)'
  echo "$output" | jq -e '.egress.requests | any(.host == "plain.test" and .path == "/via-proxy" and .verdict == "allowed")'
  echo "$output" | jq -e '.egress.requests | any(.host == "api.test" and .verdict == "refused")'
  [ "$(jq -r .network "$ESBX_ROOT/sessions/ge/holder.json")" = egress ]
  esbx_ok events ge --json
  echo "$output" | jq -se 'any(.type == "egress.request" and .host == "plain.test" and .verdict == "allowed")'
  echo "$output" | jq -se --arg d "$INET.2" 'any(.type == "egress.refused" and .destination == $d)'
  # runsc's view of /proc/sys/net is its own: the host's is untouched.
  [ -e /proc/sys/net/core/rmem_default ]
  run grep -F esbx-runsc /proc/self/mountinfo
  assert_failure
}

@test "gvisor: egress: a secret bound to a host is put in by the proxy; the sandbox holds only a placeholder" {
  api_secret
  esbx_ok session create p --name gs --isolation gvisor --network egress --allow api.test:443 \
    --secret api,inject,env=API_TOKEN,file=/run/secrets/api
  # Intercepted: the proxy's CA is in the sandbox's trust.
  esbx_ok exec gs -- curl -fsS -m 10 https://api.test/v1/user
  assert_output --partial '"/v1/user"'
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.authorization == $t'
  esbx_ok exec gs -- printenv API_TOKEN
  ph=$output
  [[ $ph == esbx-placeholder-* ]]
  esbx_ok exec gs -- cat /run/secrets/api
  [ "$output" = "$ph" ]
  esbx_ok exec gs -- sh -c 'curl -fsS -m 10 -H "Authorization: Bearer $API_TOKEN" https://api.test/v1/again'
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.path == "/v1/again" and .authorization == $t'
  esbx_fails 1 exec gs -- grep -rsF "$TOKEN" /run /tmp /etc /root /home /workspace /proc/self/environ
  run grep -rsF "$TOKEN" "$ESBX_ROOT/sessions/gs" /run/esbx/egress
  assert_failure
  esbx_ok events gs --json
  refute_output --partial "$TOKEN"
  echo "$output" | jq -se 'any(.type == "egress.request" and .host == "api.test" and .secrets == "api" and .intercepted)'
}

# Is any process in net namespace $1 (ns:[INODE])?
netns_used() {
  local f
  for f in /proc/[0-9]*/ns/net; do
    [ "$(readlink "$f" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}

@test "gvisor: egress: stop and discard leave no link, set element, slot or net namespace" {
  esbx_ok session create p --name gd --isolation gvisor --network egress --allow plain.test:80
  esbx_ok exec gd -- curl -fsS -m 10 http://plain.test/one
  egress_objects gd
  ns=$(readlink "/proc/$(holder_pid gd)/ns/net")
  [ "$ns" != "$(readlink /proc/self/ns/net)" ]
  ip link show "$link"
  nft_names_link "$link"
  slot=${link#esbxe}
  [ -e "/run/esbx/egress/$slot.json" ]
  esbx_ok session stop gd
  run ip link show "$link"
  assert_failure
  run nft_names_link "$link"
  assert_failure
  [ ! -e "/run/esbx/egress/$slot.json" ]
  run netns_used "$ns"
  assert_failure
  # Back on the next exec, with a network of its own again.
  esbx_ok exec gd -- curl -fsS -m 10 http://plain.test/two
  egress_objects gd
  ns=$(readlink "/proc/$(holder_pid gd)/ns/net")
  esbx_ok discard gd
  run ip link show "$link"
  assert_failure
  run nft_names_link "$link"
  assert_failure
  [ ! -e "/run/esbx/egress/${link#esbxe}.json" ]
  run netns_used "$ns"
  assert_failure
}

@test "gvisor: stop and discard end the sandbox and its gofer, and leave no mount" {
  esbx_ok exec g1 -- true
  run sandbox_procs g1
  [ -n "$output" ]
  esbx_ok session stop g1
  run sandbox_procs g1
  [ -z "$output" ] || [ "$(holder_pid g1)" = "" ]
  # Starts again on the next exec, with a new sandbox.
  esbx_ok exec g1 -- true
  procs=$(sandbox_procs g1)
  [ -n "$procs" ]
  esbx_ok discard g1
  for pid in $procs; do ! kill -0 "$pid" 2>/dev/null; done
  run grep -F "$ESBX_ROOT/sessions/g1" /proc/self/mountinfo
  assert_failure
}

@test "gvisor: a fork keeps its parent's tier unless it names another" {
  esbx_ok exec g1 -- sh -c 'echo forked >/workspace/f'
  esbx_ok session fork g1 --name g1f
  esbx_ok session inspect g1f
  assert_output --partial '"isolation": "gvisor"'
  esbx_ok exec g1f -- sh -c 'uname -r; cat /workspace/f'
  assert_output $'4.4.0\nforked'
  esbx_ok session fork g1 --name g1n --isolation namespaces
  esbx_ok exec g1n -- uname -r
  assert_output "$(uname -r)"
}
