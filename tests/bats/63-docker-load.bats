#!/usr/bin/env bats
# Docker load (issue 7): 50 containers across 25 esbx volumes, started
# concurrently with `docker run -d`.  Every container mounts its volume (it
# writes a file that shows up in the session), the plugin's persisted mount
# counts (ROOT/plugin/volumes/NAME.json, "mounts": {ID: count}) reach two per
# volume, and after the containers are removed every count is back to zero
# and no mount of the store is left.

load docker_helpers

VOLUMES=25
CONTAINERS=50

setup() {
  setup_docker
  make_project demo
}

# Total of the mount counts the plugin persisted for volume $1.
mount_total() {
  jq '[.mounts // {} | .[]] | add // 0' "$ESBX_ROOT/plugin/volumes/$1.json"
}

store_mounts() {
  grep -cF " $ESBX_ROOT/" /proc/self/mountinfo || true
}

@test "50 containers on 25 esbx volumes start concurrently, mount, and release every mount" {
  local i v t0=$SECONDS
  for i in $(seq 0 $((VOLUMES - 1))); do
    docker volume create -d "$DRIVER" -o project=demo "${DRIVER}v$i" >/dev/null &
  done
  wait
  for i in $(seq 0 $((VOLUMES - 1))); do
    docker volume inspect "${DRIVER}v$i" >/dev/null || fail "volume ${DRIVER}v$i was not created"
  done

  for i in $(seq 0 $((CONTAINERS - 1))); do
    v=${DRIVER}v$((i % VOLUMES))
    dstart "c$i" -v "$v:/work" "$ESBX_TEST_IMAGE" \
      sh -c "echo $i >/work/c$i && exec sleep 600" 2>"$BATS_TEST_TMPDIR/run$i.err" &
  done
  wait
  echo "# started $CONTAINERS containers in $((SECONDS - t0)) s" >&3

  # Every container runs and wrote into its session.
  for i in $(seq 0 $((CONTAINERS - 1))); do
    v=${DRIVER}v$((i % VOLUMES))
    [ "$(docker inspect -f '{{.State.Running}}' "c$i-$DRIVER" 2>/dev/null)" = true ] ||
      fail "container c$i is not running: $(cat "$BATS_TEST_TMPDIR/run$i.err")"
    local f=$ESBX_ROOT/sessions/$v/merged/c$i n=0
    while [ ! -f "$f" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    [ "$(cat "$f")" = "$i" ] || fail "c$i did not write into session $v"
  done
  for i in $(seq 0 $((VOLUMES - 1))); do
    v=${DRIVER}v$i
    assert_equal "$(mount_total "$v")" 2
    is_mounted "$v" || fail "$v is not mounted"
  done

  # Remove them all at once: every Unmount arrives.
  for i in $(seq 0 $((CONTAINERS - 1))); do
    docker rm -f "c$i-$DRIVER" >/dev/null &
  done
  wait
  for i in $(seq 0 $((VOLUMES - 1))); do
    v=${DRIVER}v$i
    assert_equal "$(mount_total "$v")" 0
    ! is_mounted "$v" || fail "$v is still mounted with no container"
  done
  assert_equal "$(store_mounts)" 0
  # dockerd's own mount namespace holds no stale bind mount of a session.
  run grep -cF "$ESBX_ROOT/" "/proc/$(dockerd_pid)/mountinfo"
  assert_output 0
  echo "# whole cycle $((SECONDS - t0)) s" >&3
}
