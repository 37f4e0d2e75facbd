#!/usr/bin/env bats
# podman with esbx: esbxd as a Docker volume plugin ([engine.volume_plugins])
# and esbx-runtime as an extra OCI runtime ([engine.runtimes]) over crun,
# podman's default.  No dockerd: podman runs here with a containers.conf
# (CONTAINERS_CONF) and a storage root (CONTAINERS_STORAGE_CONF) of this
# file's own, removed at the end; each test runs its own esbxd and store,
# serving the plugin socket the file's containers.conf names.  Nothing of
# the host's podman configuration, /run/docker/plugins or
# /etc/esbx/runtime.conf is touched.

load helpers
load runtime_helpers

IMAGE=localhost/esbx-test:latest
DRIVER=esbxt

setup_file() {
  command -v podman >/dev/null || skip "podman is not installed"
  command -v crun >/dev/null || skip "crun is not installed"
  [ -x "$ESBXD" ] || skip "esbxd is not built at $ESBXD"
  [ -x "$RT" ] || skip "esbx-runtime is not built at $RT"
  local d=$BATS_FILE_TMPDIR/podman oci nofile nproc
  PODMAN_DIR=$d
  export PODMAN_DIR
  mkdir -p "$d/tmp" "$d/cni"
  oci=$(oci_runtime crun)
  # The runtime as podman calls it.  podman hands runtimes almost none of
  # its environment, so the settings come from a runtime.conf that each
  # test writes (the test's store, crun).
  cat >"$d/esbx-runtime" <<EOF
#!/bin/sh
ESBX_RUNTIME_CONF=$d/runtime.conf exec $RT "\$@"
EOF
  chmod +x "$d/esbx-runtime"
  cat >"$d/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$d/storage"
runroot = "$d/run"
EOF
  # podman 4.3 sets RLIMIT_NOFILE and RLIMIT_NPROC to 1048576 unless told,
  # which fails where root lacks CAP_SYS_RESOURCE and the hard limits are
  # lower: ask for what this process has.
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 16384 ]; } && nproc=16384
  cat >"$d/containers.conf" <<EOF
[containers]
netns = "none"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$d/events.log"
tmp_dir = "$d/tmp"
volume_path = "$d/volumes"
network_config_dir = "$d/cni"
lock_type = "file"
runtime = "crun"
runtime_supports_json = ["crun", "runc", "esbx"]

[engine.runtimes]
crun = ["$oci"]
esbx = ["$d/esbx-runtime"]

[engine.volume_plugins]
$DRIVER = "$d/esbx.sock"
EOF
  export CONTAINERS_CONF=$d/containers.conf CONTAINERS_STORAGE_CONF=$d/storage.conf
  "$ESBX_SRC/hack/docker-test-image" --engine podman "$IMAGE" >/dev/null 2>&1 ||
    skip "podman cannot import an image here"
}

teardown_file() {
  [ -n "${PODMAN_DIR:-}" ] && [ -d "$PODMAN_DIR" ] || return 0
  podman rm -af -t 0 >/dev/null 2>&1 || true
  # podman's overlay mounts, and storage/overlay bound onto itself.
  grep -F "$PODMAN_DIR" /proc/self/mountinfo | awk '{print $5}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$PODMAN_DIR"
  # The cgroupfs manager's parent of conmons and containers, when empty.
  local d
  for d in /sys/fs/cgroup/libpod_parent /sys/fs/cgroup/*/libpod_parent; do
    [ -d "$d" ] && rmdir "$d/conmon" "$d" 2>/dev/null
  done
  return 0
}

setup() {
  setup_store
  S=v$BATS_TEST_NUMBER
  ESBXD_LOG=$BATS_TEST_TMPDIR/esbxd.log
  printf 'runc=%s\nroot=%s\n' "$(awk -F'"' '/^crun = /{print $2}' "$CONTAINERS_CONF")" \
    "$ESBX_ROOT" >"$PODMAN_DIR/runtime.conf"
  ESBXD_PID=$(ESBXD=$ESBXD "$ESBX_SRC/hack/start-esbxd" --root "$ESBX_ROOT" \
    --plugin-socket "$PODMAN_DIR/esbx.sock" --log "$ESBXD_LOG" -- --gateway-socket none \
    --metrics none)
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
}

teardown() {
  local v
  podman rm -af -t 0 >/dev/null 2>&1 || true
  for v in $(podman volume ls -q 2>/dev/null); do
    podman volume rm -f "$v" >/dev/null 2>&1 || true
  done
  esbxd_log_if_failed "${ESBXD_LOG:-}"
  if [ -n "${ESBXD_PID:-}" ]; then
    kill -TERM "$ESBXD_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$ESBXD_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$PODMAN_DIR/esbx.sock" "$PODMAN_DIR/runtime.conf"
  stop_holders
  teardown_store
}

# `pvol NAME`: an esbx volume of project demo through podman.
pvol() {
  podman volume create --driver "$DRIVER" -o project=demo "$1"
}

@test "podman: volume create --driver makes a session; a container's writes show in esbx diff" {
  run pvol "$S"
  assert_success
  assert_output "$S"
  esbx_ok session list
  assert_output --partial "$S"
  run podman run --rm -v "$S":/work "$IMAGE" sh -c 'cat /work/README; echo x > /work/f'
  assert_success
  assert_output hello
  esbx_ok diff "$S"
  assert_output --partial "/f"
  # The session is the volume: a second container sees the first one's file.
  run podman run --rm -v "$S":/work "$IMAGE" cat /work/f
  assert_output x
}

@test "podman: --runtime esbx puts the container into the session's holder" {
  pvol "$S" >/dev/null
  podman run -d --name a1 --runtime esbx -v "$S":/work "$IMAGE" sleep 300 >/dev/null
  podman run -d --name a2 --runtime esbx -v "$S":/work "$IMAGE" sleep 301 >/dev/null
  local holder cg ns
  holder=$(holder_pid "$S")
  kill -0 "$holder"
  # A pid namespace of its own, not the holder's (which esbx exec joins).
  run podman exec a1 readlink /proc/self/ns/pid
  assert_success
  ns=$output
  refute [ "$ns" = "$(readlink "/proc/$holder/ns/pid")" ]
  esbx_ok exec "$S" -- readlink /proc/self/ns/pid
  refute_output "$ns"
  for t in net uts ipc; do
    run podman exec a2 readlink "/proc/self/ns/$t"
    assert_output "$(readlink "/proc/$holder/ns/$t")"
  done
  run podman exec a2 ps -o args
  refute_output --partial "sleep 300"
  assert_output --partial "sleep 301"
  refute_output --partial esbx-holder
  esbx_ok ps "$S"
  assert_output --partial "sleep 300"
  assert_output --partial "sleep 301"
  run podman exec a1 hostname
  assert_output "$S"
  # The session's cgroup holds the container's processes.
  cg=$(jq -r .cgroup "$ESBX_ROOT/sessions/$S/holder.json")
  run podman exec a1 cat /proc/self/cgroup
  assert_line --regexp ":/$cg/[0-9a-f]{64}$"
  run grep -c '"container-attached"' "$ESBX_ROOT/sessions/$S/events.jsonl"
  assert_output 2
  # rm -f ends the container, not the session: the holder and the other
  # container stay.
  run podman rm -f a1
  assert_success
  run podman ps -aq --filter name=a1
  assert_output ""
  run grep -c '"container-detached"' "$ESBX_ROOT/sessions/$S/events.jsonl"
  assert_output 1
  kill -0 "$holder"
  esbx_ok ps "$S"
  refute_output --partial "sleep 300"
  assert_output --partial "sleep 301"
}

@test "podman: volume rm discards the session and ends its holder" {
  pvol "$S" >/dev/null
  run podman run --rm --runtime esbx -v "$S":/work "$IMAGE" sh -c 'echo y > /work/g'
  assert_success
  local holder
  holder=$(holder_pid "$S")
  kill -0 "$holder"
  run podman volume rm "$S"
  assert_success
  wait_gone "$holder"
  esbx_ok session list
  refute_output --partial "$S"
  [ ! -d "$ESBX_ROOT/sessions/$S" ]
}

@test "podman: an esbx-runtime failure is podman's error and leaves no container running" {
  pvol "$S" >/dev/null
  pvol "${S}b" >/dev/null
  run podman run --rm --runtime esbx -v "$S":/a -v "${S}b":/b "$IMAGE" true
  assert_failure
  assert_output --partial "two esbx sessions"
  run podman ps -aq
  assert_output ""
}

@test "podman: a container without esbx volumes runs under esbx-runtime as under crun" {
  run podman run --rm --runtime esbx --hostname plain "$IMAGE" hostname
  assert_success
  assert_output plain
}
