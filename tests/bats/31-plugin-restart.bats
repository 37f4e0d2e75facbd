#!/usr/bin/env bats
# esbxd and dockerd restarts lose no volume, no mount count, no data.

load docker_helpers

mount_total() {
  python3 -c 'import json,sys; print(sum(json.load(sys.stdin)["mounts"].values()))' \
    <"$ESBX_ROOT/plugin/volumes/$1.json"
}

@test "kill -9 esbxd while a container runs, restart: nothing is lost" {
  make_project demo
  dvol -o project=demo v1 >/dev/null
  dvol -o project=demo v2 >/dev/null
  dstart w -v v1:/work "$ESBX_TEST_IMAGE" \
    sh -c 'i=0; while :; do echo $i >> /work/log; i=$((i+1)); sleep 0.1; done'
  sleep 0.5

  stop_esbxd KILL
  # The container keeps writing into its session with the plugin gone.
  before=$(wc -l <"$(merged_of v1)/log")
  sleep 1
  after=$(wc -l <"$(merged_of v1)/log")
  [ "$after" -gt "$before" ]

  start_esbxd
  run docker volume ls -q --filter "driver=$DRIVER"
  assert_output "$(printf 'v1\nv2')"
  run docker volume inspect v1
  assert_success
  json=$(json_field 0 <<<"$output")
  assert_equal "$(json_field Status.mounts <<<"$json")" 1
  assert_equal "$(json_field Mountpoint <<<"$json")" "$(merged_of v1)"
  run docker exec "w-$DRIVER" sh -c 'test -s /work/log'
  assert_success

  # Later Unmount and Remove work on the state the first esbxd left.
  docker rm -f "w-$DRIVER" >/dev/null
  assert_equal "$(mount_total v1)" 0
  run is_mounted v1
  assert_failure
  esbx_ok diff v1 --json
  assert_output --partial /log
  run docker volume rm v1 v2
  assert_success
  esbx_ok --json session list
  assert_output "[]"
}

@test "kill -9 esbxd between two mounts keeps the counts per mount ID" {
  make_project demo
  dvol -o project=demo vol >/dev/null
  dstart one -v vol:/work "$ESBX_TEST_IMAGE" sleep 1000
  stop_esbxd KILL
  start_esbxd
  dstart two -v vol:/work "$ESBX_TEST_IMAGE" sleep 1000
  assert_equal "$(mount_total vol)" 2
  stop_esbxd KILL
  start_esbxd
  docker stop -t 0 "one-$DRIVER" >/dev/null
  is_mounted vol
  assert_equal "$(mount_total vol)" 1
  docker stop -t 0 "two-$DRIVER" >/dev/null
  run is_mounted vol
  assert_failure
  assert_equal "$(mount_total vol)" 0
}

# Restarting dockerd stops every container on the host: only do it when
# this suite's containers are the only ones, or when told to.
others_running() {
  [ "${ESBX_TEST_RESTART_DOCKERD:-}" = force ] && return 1
  local all ours
  all=$(docker ps -q | sort)
  ours=$(docker ps -q --filter "label=esbx-test=$DRIVER" | sort)
  [ "$all" != "$ours" ]
}

restart_dockerd() {
  local pid cmd
  pid=$(dockerd_pid)
  [ -n "$pid" ] || return 1
  mapfile -d '' cmd </proc/"$pid"/cmdline
  kill -TERM "$pid"
  local i=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    i=$((i + 1))
    [ $i -lt 150 ] || return 1
  done
  "$ESBX_SRC/hack/detach" /var/log/esbx-dockerd.log "${cmd[@]}" >/dev/null
  i=0
  until docker info >/dev/null 2>&1; do
    sleep 0.2
    i=$((i + 1))
    [ $i -lt 300 ] || return 1
  done
}

@test "a dockerd restart loses no esbx volume" {
  if others_running; then
    skip "other containers run on this dockerd (ESBX_TEST_RESTART_DOCKERD=force to restart anyway)"
  fi
  make_project demo
  dvol -o project=demo v1 >/dev/null
  dvol -o project=demo v2 >/dev/null
  drun -v v1:/work "$ESBX_TEST_IMAGE" sh -c 'echo kept > /work/kept'

  restart_dockerd

  run listed_volumes
  assert_output "$(printf 'v1\nv2')"
  run docker volume inspect v1
  assert_success
  run drun -v v1:/work "$ESBX_TEST_IMAGE" cat /work/kept
  assert_output kept
  run docker volume rm v1 v2
  assert_success
  esbx_ok --json session list
  assert_output "[]"
}
