#!/usr/bin/env bats
# A session's own disk (`--disk SIZE`): its upper and work directories on a
# filesystem of that size, so that a session at its limit gets ENOSPC and
# nobody else does.  Every test runs on a small loop-mounted store of its
# own (disk_helpers.bash), never on the machine's disk.

load disk_helpers
load gateway_helpers

setup() { :; }
teardown() {
  if [ -n "${GW_DIR:-}" ]; then
    esbxd_down
    if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -f "${GW_LOG:-}" ]; then
      echo "--- last lines of the esbxd log"
      tail -n 30 "$GW_LOG"
    fi
    rm -rf "$GW_DIR"
  fi
  teardown_small_store
}

# Write $2 MiB into file $3 of session $1's workspace from inside it; the
# status is the writer's.
fill_inside() {
  esbx_ok exec "$1" -- sh -c "head -c $(($2 * 1024 * 1024)) /dev/zero >/workspace/$3"
}

@test "without a limit, one session fills the store and another session's writes fail" {
  setup_small_store 256
  setup_project
  make_sessions p filler other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  run "$ESBX" exec other -- sh -c 'head -c 10M /dev/zero >/workspace/small'
  assert_failure
}

@test "a store default of 20M: the filler gets ENOSPC at its limit, the other session writes" {
  setup_small_store 256
  setup_project
  echo 'disk = 20M' >>"$ESBX_ROOT/defaults.conf"
  make_sessions p filler other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  # It got about its 20 MiB, no more.
  size=$(stat -c %s "$(path_of filler)/blob")
  [ "$size" -gt $((18 * 1024 * 1024)) ]
  [ "$size" -le $((21 * 1024 * 1024)) ]
  # The other session and the store have room.
  run "$ESBX" exec other -- sh -c 'head -c 10M /dev/zero >/workspace/small'
  assert_success
  [ "$(small_free)" -gt $((150 * 1024 * 1024)) ]
  echo more >"$BATS_TEST_TMPDIR/store-fs/x"
}

@test "--disk 20M: ENOSPC inside the session only, df inside shows the limit" {
  setup_small_store 256
  setup_project
  make_session p filler --disk 20M
  make_sessions p other
  run "$ESBX" exec filler -- sh -c 'head -c 400M /dev/zero >/workspace/blob'
  assert_failure
  assert_output --partial "No space left on device"
  size=$(stat -c %s "$m/blob")
  [ "$size" -gt $((18 * 1024 * 1024)) ]
  [ "$size" -le $((21 * 1024 * 1024)) ]
  fill_inside other 50 big
  # The filler's own workspace is full, its other files still read.
  run "$ESBX" exec filler -- cat /workspace/README
  assert_output hello
  run "$ESBX" exec filler -- df -k /workspace
  assert_output --regexp " 2[01][0-9]{3} "
  # Removing the blob gives its room back, inside and on the store.
  rm "$m/blob"
  fill_inside filler 15 again
}

# What this store left bound or mounted: nothing once its sessions are gone.
loops_of_store() { losetup -a | grep -F "$ESBX_ROOT/" || true; }
# No loop device of the store is left within 10 s: a loop device bound
# with autoclear goes once its last user does, which the kernel does
# beside us, and a discard's remover may still be at work.
no_loops_of_store() {
  local i
  for i in $(seq 100); do
    [ -n "$(loops_of_store)" ] || return 0
    sleep 0.1
  done
  loops_of_store
  return 1
}
mounts_of_store() { grep -F "$ESBX_ROOT/" /proc/self/mountinfo | awk '{print $5}' || true; }

@test "a bad disk size is refused in one line naming it, and changes nothing" {
  setup_project
  for bad in 20Q -5M 1k 7M 99999999G ''; do
    run "$ESBX" session create p --name s --disk "$bad"
    [ "$status" -eq 2 ]
    assert_line --index 0 "esbx: invalid disk size \`$bad\`: expected e.g. 512M or 10G (from 8M to 16384G), or none"
  done
  [ ! -e "$ESBX_ROOT/sessions/s" ]
  [ -z "$(ls "$ESBX_ROOT/tmp")" ]
  run "$ESBX" project disk p --disk lots
  [ "$status" -eq 2 ]
  assert_line --index 0 "esbx: project \`p\`: invalid disk size \`lots\`: expected e.g. 512M or 10G (from 8M to 16384G), or none"
  [ ! -e "$ESBX_ROOT/projects/p/disk.json" ]
  echo 'disk = big' >"$ESBX_ROOT/defaults.conf"
  run "$ESBX" session create p --name s
  assert_failure
  assert_output --partial "defaults.conf:1: invalid disk size \`big\`"
  [ ! -e "$ESBX_ROOT/sessions/s" ]
  rm "$ESBX_ROOT/defaults.conf"
  no_loops_of_store
}

@test "publish, rebase, fork, discard, trash and restore of a session with its own disk" {
  setup_project
  make_session p lim --disk 20M
  echo new >"$m/new.txt"
  printf 'a\nb\nc\nd\ne\n' >"$m/docs/guide.txt"
  esbx_ok publish lim -m "from lim"
  esbx_ok show p:/new.txt
  assert_output new
  # Rebase: another session changes the first line, this one the last;
  # the merge lands in the upper on the disk (a copy, not a rename,
  # across filesystems).
  make_session p other
  printf 'A\nb\nc\nd\ne\n' >"$m/docs/guide.txt"
  esbx_ok publish other -m "from other" --discard
  printf 'a\nb\nc\nd\nE\n' >"$(path_of lim)/docs/guide.txt"
  esbx_ok rebase lim
  run cat "$(path_of lim)/docs/guide.txt"
  assert_output "$(printf 'A\nb\nc\nd\nE')"
  [ -z "$(find "$ESBX_ROOT/sessions/lim/" -maxdepth 1 -name 'merge.*')" ]
  # The limit still holds after the rebase remounted the view.
  run "$ESBX" exec lim -- sh -c 'head -c 40M /dev/zero >/workspace/blob'
  assert_output --partial "No space left on device"
  rm "$(path_of lim)/blob"
  # A fork gets a disk of its own, of its parent's size.
  echo forked >"$(path_of lim)/f.txt"
  esbx_ok session fork lim --name f
  esbx_ok --json session inspect f
  echo "$output" | jq -e '.limits.disk == 20971520 and .disk.mounted and .disk.size == "20M"'
  [ "$(cat "$(path_of f)/f.txt")" = forked ]
  run "$ESBX" exec f -- sh -c 'head -c 40M /dev/zero >/workspace/blob'
  assert_output --partial "No space left on device"
  run "$ESBX" exec lim -- sh -c 'head -c 10M /dev/zero >/workspace/ok'
  assert_success
  esbx_ok discard f --force
  # A bigger one when asked.
  esbx_ok session fork lim --name g --disk 30M
  esbx_ok --json session inspect g
  echo "$output" | jq -e '.limits.disk == 31457280'
  esbx_ok discard g --force
  # Discard to the trash: the image goes with it, unmounted and unbound.
  esbx_ok discard lim
  assert_output --partial "kept in the trash"
  entry=$(basename "$ESBX_ROOT"/trash/lim.*)
  [ -f "$ESBX_ROOT/trash/$entry/disk.img" ]
  no_loops_of_store
  [ -z "$(mounts_of_store)" ]
  esbx_ok --json trash list
  echo "$output" | jq -e '.[0].size > 10000000'
  # Restore mounts it again, limit and files.
  esbx_ok trash restore "$entry"
  [ "$(cat "$(path_of lim)/f.txt")" = forked ]
  [ -f "$(path_of lim)/ok" ]
  run "$ESBX" exec lim -- sh -c 'head -c 40M /dev/zero >/workspace/blob'
  assert_output --partial "No space left on device"
  esbx_ok discard lim --force
  esbx_ok trash purge --all
  no_loops_of_store
  [ -z "$(mounts_of_store)" ]
}

@test "after a reboot the disk is mounted again on first use; gc unbinds stale loop devices" {
  setup_project
  make_session p s --disk 20M
  echo kept >"$m/kept.txt"
  d=$ESBX_ROOT/sessions/s
  # What a reboot leaves: nothing mounted, nothing bound.
  esbx_ok session stop s
  umount "$d/merged" 2>/dev/null || true
  umount "$d/upper"
  umount "$d/disk"
  [ -z "$(mounts_of_store)" ]
  no_loops_of_store
  esbx_ok --json session inspect s
  echo "$output" | jq -e '.disk.mounted == false'
  # The first use mounts it: diff, exec, publish see the files.
  esbx_ok diff s
  assert_output "A /kept.txt"
  run "$ESBX" exec s -- cat /workspace/kept.txt
  assert_output kept
  # A device bound by hand to the image of a session not mounted is
  # unbound by gc; one in use is left alone.
  esbx_ok session stop s
  umount "$d/merged" 2>/dev/null || true
  umount "$d/upper"
  umount "$d/disk"
  dev=$(losetup -f --show "$d/disk.img")
  make_session p busy --disk 20M
  esbx_ok gc
  assert_output --partial "detached $dev, which no mount used (\`$d/disk.img\`)"
  [ "$(loops_of_store | wc -l)" -eq 1 ]
  loops_of_store | grep -F "sessions/busy/disk.img"
  # A stale device of a session used again is taken over, not doubled, and
  # goes with the session.
  dev=$(losetup -f --show "$d/disk.img")
  run "$ESBX" exec s -- cat /workspace/kept.txt
  assert_output kept
  [ "$(loops_of_store | grep -c "sessions/s/disk.img")" -eq 1 ]
  esbx_ok discard s --force
  esbx_ok discard busy --force
  no_loops_of_store
  [ -z "$(mounts_of_store)" ]
}

@test "a host without loop devices refuses --disk with a clear error" {
  setup_project
  # This process's own view: /dev/loop-control is /dev/null there.
  run unshare -m sh -c 'mount --bind /dev/null /dev/loop-control && exec "$0" session create p --name s --disk 20M' "$ESBX"
  assert_failure
  assert_output --regexp "^esbx: session create: a disk of 20M: this host has no loop devices \(/dev/loop-control: .*\)$"
  [ ! -e "$ESBX_ROOT/sessions/s" ]
  # Without --disk, as before.
  run unshare -m sh -c 'mount --bind /dev/null /dev/loop-control && exec "$0" session create p --name s' "$ESBX"
  assert_success
}

@test "project and store defaults: the project's, else the store's; --disk wins" {
  setup_project
  esbx_ok project disk p
  echo "$output" | jq -e '.disk == null and .store == null'
  echo 'disk = 24M' >"$ESBX_ROOT/defaults.conf"
  make_session p a
  esbx_ok --json session inspect a
  echo "$output" | jq -e '.limits.disk == 25165824'
  esbx_ok project disk p --disk 32M
  esbx_ok project disk p
  echo "$output" | jq -e '.disk == "32M" and .store == "24M"'
  make_session p b
  make_session p c --disk 16M
  make_session p d --disk none
  esbx_ok --json session inspect b
  echo "$output" | jq -e '.limits.disk == 33554432'
  esbx_ok --json session inspect c
  echo "$output" | jq -e '.limits.disk == 16777216'
  esbx_ok --json session inspect d
  echo "$output" | jq -e '.limits.disk == null and .disk == null'
  # A project may say none whatever the store says; "default" goes back.
  esbx_ok project disk p --disk none
  make_session p e
  esbx_ok --json session inspect e
  echo "$output" | jq -e '.limits.disk == null'
  esbx_ok project disk p --disk default
  echo 'disk = none' >"$ESBX_ROOT/defaults.conf"
  make_session p f
  esbx_ok --json session inspect f
  echo "$output" | jq -e '.limits.disk == null'
  # Existing sessions keep what they got.
  esbx_ok --json session inspect b
  echo "$output" | jq -e '.limits.disk == 33554432'
}

# `plugin_call ENDPOINT BODY` on esbxd's plugin socket: $http_code, $output.
plugin_call() {
  local out
  out=$(curl -s --unix-socket "$GW_DIR/plugin.sock" -X POST \
    -H 'Accept: application/vnd.docker.plugins.v1.2+json' \
    --data-binary "$2" -w '\n%{http_code}' "http://plugin/$1")
  http_code=${out##*$'\n'}
  output=${out%$'\n'*}
}

@test "the gateway's \"disk\" and the plugin's -o disk=SIZE; a limited token gets at most the default" {
  setup_project
  setup_gateway
  ALL=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/sessions "$ALL" '{"project":"p","name":"g1","disk":"20M"}'
  gw_expect 200 GET /v1/sessions/g1 "$ALL"
  echo "$output" | jq -e '.limits.disk == 20971520 and .disk.mounted'
  gw_expect 400 POST /v1/sessions "$ALL" '{"project":"p","name":"g2","disk":"20Q"}'
  assert_output --partial "invalid disk size \`20Q\`"
  gw_expect 201 POST /v1/sessions/g1/fork "$ALL" '{"name":"g1f"}'
  gw_expect 200 GET /v1/sessions/g1f "$ALL"
  echo "$output" | jq -e '.limits.disk == 20971520'
  # With a store default, a project token may ask for less, not for more
  # or for none; a token without limits may.
  echo 'disk = 24M' >"$ESBX_ROOT/defaults.conf"
  TOKEN=$(token manage,runtime,observe --project p)
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"p","name":"t1"}'
  gw_expect 200 GET /v1/sessions/t1 "$TOKEN"
  echo "$output" | jq -e '.limits.disk == 25165824'
  gw_expect 201 POST /v1/sessions "$TOKEN" '{"project":"p","name":"t2","disk":"16M"}'
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"p","name":"t3","disk":"1G"}'
  assert_output --partial "a disk of 1G, more than the default of 24M, needs a token without project or session limits"
  gw_expect 403 POST /v1/sessions "$TOKEN" '{"project":"p","name":"t3","disk":"none"}'
  gw_expect 403 POST /v1/sessions/t1/fork "$TOKEN" '{"name":"t1f","disk":"1G"}'
  [ ! -e "$ESBX_ROOT/sessions/t3" ]
  gw_expect 201 POST /v1/sessions "$ALL" '{"project":"p","name":"t4","disk":"none"}'
  # The plugin: -o disk=SIZE, and a bad one named.
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "p", "disk": "20M"}}'
  [ "$http_code" = 200 ]
  esbx_ok --json session inspect v1
  echo "$output" | jq -e '.limits.disk == 20971520'
  plugin_call VolumeDriver.Create '{"Name": "v2", "Opts": {"project": "p", "disk": "huge"}}'
  [ "$http_code" = 400 ]
  assert_output --partial "option \`disk\`: invalid disk size \`huge\`"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "p", "disk": "30M"}}'
  [ "$http_code" != 200 ]
  plugin_call VolumeDriver.Mount '{"Name": "v1", "ID": "c1"}'
  [ "$http_code" = 200 ]
  mp=$(jq -r .Mountpoint <<<"$output")
  run sh -c "head -c 40M /dev/zero >'$mp/blob'"
  assert_output --partial "No space left on device"
  plugin_call VolumeDriver.Unmount '{"Name": "v1", "ID": "c1"}'
  plugin_call VolumeDriver.Remove '{"Name": "v1"}'
  [ "$http_code" = 200 ]
  [ -z "$(loops_of_store | grep -F sessions/v1/ || true)" ]
}

@test "a create killed once its disk is mounted leaves a temp dir that gc clears, mount and device" {
  if ! strings "$ESBX" | grep -qx 'ESBX_FAILPOINT'; then
    skip "esbx built without ESBX_FAILPOINTS"
  fi
  setup_project
  run env ESBX_FAILPOINT=session-disk-mounted "$ESBX" session create p --name half --disk 20M
  [ "$status" -eq 137 ]
  [ ! -e "$ESBX_ROOT/sessions/half" ]
  [ -n "$(mounts_of_store)" ]
  [ -n "$(loops_of_store)" ]
  esbx_ok gc
  assert_output --partial "removed"
  [ -z "$(ls "$ESBX_ROOT/tmp")" ]
  [ -z "$(mounts_of_store)" ]
  no_loops_of_store
  make_session p half --disk 20M
}
