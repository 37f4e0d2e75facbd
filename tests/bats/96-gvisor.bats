#!/usr/bin/env bats
# The gVisor tier: session create --isolation gvisor runs the session in a
# runsc sandbox (shim/lib/gvisor.c).  The boundary suite runs under it too
# (ESBX_TEST_ISOLATION=gvisor, .ci/run).

load helpers

setup() {
  need_runsc
  setup_project
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

@test "gvisor: the network is gVisor's loopback; egress and host are refused with the cause" {
  esbx_ok exec g1 -- cat /proc/net/dev
  assert_output --partial 'lo:'
  refute_output --partial 'eth0'
  esbx_fails 2 session create p --name g3 --isolation gvisor --network egress --allow example.test:443
  assert_output --partial '--isolation gvisor: network `egress` is not available'
  esbx_fails 2 session create p --name g3 --isolation gvisor --network host
  esbx_fails 2 session create p --name g3 --isolation maybe
  assert_output --partial 'invalid --isolation `maybe`'
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
