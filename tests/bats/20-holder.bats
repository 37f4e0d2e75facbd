#!/usr/bin/env bats
# The session holder: namespaces, hostname, network, root filesystem,
# lifetime.

load helpers

setup() { setup_project; }

@test "the holder starts on first exec, is recorded with its start time and outlives the CLI" {
  esbx_ok session create p --name s1
  assert_file_not_exists "$ESBX_ROOT/sessions/s1/holder.json"
  esbx_ok exec s1 -- true
  pid=$(holder_pid s1)
  [ -n "$pid" ]
  start=$(sed -n 's/^ *"starttime": *\([0-9]*\).*/\1/p' "$ESBX_ROOT/sessions/s1/holder.json")
  [ "$start" = "$(awk '{sub(/.*\) /, ""); print $20}' /proc/$pid/stat)" ]
  run grep -a esbx-holder "/proc/$pid/cmdline"
  assert_success
  # It is nobody's child in our process tree: it survived the esbx that started it.
  run awk '/^PPid:/ {print $2}' "/proc/$pid/status"
  [ "$output" != "$$" ]
  # And a second exec reuses it.
  esbx_ok exec s1 -- true
  [ "$(holder_pid s1)" = "$pid" ]
  esbx_ok session inspect s1
  assert_output --partial "\"holder\": $pid"
}

@test "the holder is PID 1 and the hostname is the session name" {
  esbx_ok session create p --name box-1
  esbx_ok exec box-1 -- hostname
  assert_output "box-1"
  esbx_ok exec box-1 -- sh -c 'cat /proc/1/cmdline | tr "\0" " "'
  assert_output --partial "esbx-holder"
}

@test "network none: only loopback, and it is up" {
  esbx_ok session create p --name s1
  esbx_ok exec s1 -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
  assert_output "lo"
  esbx_ok exec s1 -- ip -o link
  assert_output --partial "lo:"
  assert_output --partial "UP"
  [ "$(echo "$output" | wc -l)" -eq 1 ]
  esbx_ok session inspect s1
  assert_output --partial '"network": "none"'
}

@test "network host: the host's interfaces are visible" {
  # The host's network namespace itself (its interfaces come and go with
  # whatever else runs on the host, so they are not compared as a list).
  host=$(readlink /proc/self/ns/net)
  esbx_ok session create p --name s1 --network host
  esbx_ok exec s1 -- readlink /proc/self/ns/net
  assert_output "$host"
  # The interface of the host's default route, when it has one, is there.
  dev=$(ip route show default | awk '{ print $5; exit }')
  if [ -n "$dev" ]; then
    esbx_ok exec s1 -- cat /proc/net/dev
    assert_output --partial "$dev:"
  fi
  esbx_ok session inspect s1
  assert_output --partial '"network": "host"'
}

@test "the host root is read-only, the workspace writable, /tmp private" {
  make_sessions p s1 s2
  run "$ESBX" exec s1 -- touch /usr/esbx-must-not-exist
  assert_failure
  assert_output --partial "Read-only file system"
  assert_file_not_exists /usr/esbx-must-not-exist
  esbx_ok exec s1 -- sh -c 'echo one >/workspace/new && echo tmp >/tmp/private-$$ && ls /tmp'
  assert_file_exists "$ESBX_ROOT/sessions/s1/merged/new"
  name=$output
  assert_file_not_exists "/tmp/$name"
  esbx_ok exec s2 -- ls -A /tmp
  assert_output ""
  esbx_ok exec s2 -- cat /workspace/README
  assert_output "hello"
  run "$ESBX" exec s2 -- cat /workspace/new
  assert_failure
}

@test "the store is out of sight inside a session" {
  esbx_ok session create p --name s1
  run "$ESBX" exec s1 -- ls "$ESBX_ROOT/sessions"
  assert_failure
}

@test "a custom workspace path" {
  esbx_ok session create p --name s1 --workspace /src
  esbx_ok exec s1 -- pwd
  assert_output "/src"
  esbx_ok exec s1 -- cat /src/README
  assert_output "hello"
}

@test "SIGTERM ends the holder and every process of the session" {
  esbx_ok session create p --name s1
  esbx_ok exec --detach s1 -- sleep 300
  pid=$(holder_pid s1)
  sleeper=$(pgrep -f -P "$pid" 'sleep 300')
  [ -n "$sleeper" ]
  kill -TERM "$pid"
  wait_gone "$sleeper"
  wait_gone "$pid"
  # The next exec notices and starts a fresh holder.
  esbx_ok exec s1 -- true
  [ "$(holder_pid s1)" != "$pid" ]
  esbx_ok events s1
  assert_output --partial "holder.lost"
}

@test "a session that does not exist gets no holder" {
  esbx_fails 1 exec nosuch -- true
  assert_output --partial "session \`nosuch\` does not exist"
}
