#!/usr/bin/env bats
# Docker-first workflows: volumes made the way Docker's own external volume
# driver tests make them (moby's TestExternalVolumeDriverNamed/Unnamed): no
# driver options, anonymous volumes with --rm, and Mount errors that name
# their cause.  Through a real dockerd.

load docker_helpers

# Every test: a project `demo` and an esbxd whose default project it is,
# with a config file of its own (empty).
setup() {
  touch "$BATS_TEST_TMPDIR/esbxd.conf"
  setup_docker --config "$BATS_TEST_TMPDIR/esbxd.conf" --default-project demo
  make_project demo
}

# Start esbxd again with only the config file (no --default-project).
restart_with_config() {
  stop_esbxd TERM
  start_esbxd --config "$BATS_TEST_TMPDIR/esbxd.conf"
}

# `wait_for_log TEXT`: until esbxd's log has TEXT (5 s at most).
wait_for_log() {
  local i=0
  until grep -qF "$1" "$ESBXD_LOG"; do
    i=$((i + 1))
    [ $i -lt 50 ] || fail "no \`$1\` in esbxd's log"
    sleep 0.1
  done
}

session_count() {
  "$ESBX" session list --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'
}

@test "docker run -v NAME:/work with no options: a session of the default project" {
  drun -v agent1:/work "$ESBX_TEST_IMAGE" sh -c 'echo hello >/work/new'
  esbx_ok session inspect agent1
  assert_output --partial '"project": "demo"'
  esbx_ok diff agent1
  assert_output --partial "A /new"
  # The same volume again: the session's files are there.
  run drun -v agent1:/work "$ESBX_TEST_IMAGE" cat /work/new
  assert_success
  assert_output hello
}

@test "docker volume create -d esbx NAME with no options uses the default project" {
  dvol plain
  esbx_ok session inspect plain
  assert_output --partial '"project": "demo"'
}

@test "a volume named PROJECT.SESSION belongs to that project, whatever the default" {
  make_project web
  drun -v web.agent2:/work "$ESBX_TEST_IMAGE" sh -c 'echo x >/work/y'
  esbx_ok session inspect web.agent2
  assert_output --partial '"project": "web"'
  esbx_ok session list
  assert_output --partial "web.agent2"
  # A dot that names no project is part of the session's name.
  dvol no.such.project
  esbx_ok session inspect no.such.project
  assert_output --partial '"project": "demo"'
}

@test "anonymous volume with --rm: a session while the container runs, nothing after" {
  drun -v /work "$ESBX_TEST_IMAGE" sh -c 'echo x >/work/f; cat /proc/self/mountinfo' \
    >"$BATS_TEST_TMPDIR/mounts"
  grep -q " /work " "$BATS_TEST_TMPDIR/mounts"
  # Docker removed the volume it made: no session, no record, no mount.
  assert_equal "$(session_count)" 0
  [ -z "$(plugin_volumes)" ]
  run grep -F "$ESBX_ROOT/sessions" /proc/self/mountinfo
  assert_failure
  # Not even in the trash: nobody could name it to restore it.
  esbx_ok trash list --json
  assert_output "[]"
  # --mount with the driver behaves the same.
  docker run --rm --label "esbx-test=$DRIVER" \
    --mount "type=volume,dst=/work,volume-driver=$DRIVER" "$ESBX_TEST_IMAGE" true
  assert_equal "$(session_count)" 0
}

@test "without a default project the refusal says how to set one" {
  restart_with_config
  run drun -v agent3:/work "$ESBX_TEST_IMAGE" true
  assert_failure
  assert_output --partial "--default-project"
  run "$ESBX" session inspect agent3
  assert_failure
}

@test "the config file names the default project and is read again on SIGHUP" {
  make_project other
  echo "default-project = other  # agents' volumes" >"$BATS_TEST_TMPDIR/esbxd.conf"
  restart_with_config
  dvol c1
  esbx_ok session inspect c1
  assert_output --partial '"project": "other"'
  echo "default-project = demo" >"$BATS_TEST_TMPDIR/esbxd.conf"
  kill -HUP "$ESBXD_PID"
  wait_for_log "default project \`demo\`"
  dvol c2
  esbx_ok session inspect c2
  assert_output --partial '"project": "demo"'
  # A broken file on SIGHUP is logged and changes nothing.
  echo "default-project = bad/name" >"$BATS_TEST_TMPDIR/esbxd.conf"
  kill -HUP "$ESBXD_PID"
  wait_for_log "the settings in force stay"
  dvol c3
  esbx_ok session inspect c3
  assert_output --partial '"project": "demo"'
}

@test "a Mount that fails names the kernel's cause and the directory" {
  dvol broken
  umount "$(merged_of broken)" 2>/dev/null || true
  rm -rf "$ESBX_ROOT/sessions/broken/work"
  run drun -v broken:/work "$ESBX_TEST_IMAGE" true
  assert_failure
  assert_output --partial "No such file or directory"
  assert_output --partial "sessions/broken/work"
  refute_output --partial "No data available"
}
