#!/usr/bin/env bats
# esbx-runtime without Docker: real runc, OCI bundles over a busybox rootfs.
# Containers are created through esbx-runtime exactly as the containerd shim
# would (global flags, then the verb), started with runc's `start`.
#
# ESBX_TEST_OCI=crun runs the same cases with crun as the wrapped runtime
# (hack/test runs both): $OCI is the runtime the tests call directly and
# the one esbx-runtime execs ($ESBX_RUNC); with runc, esbx-runtime finds it
# on $PATH as it does on a Docker host.

# Containers join sessions without a user namespace (helpers.bash's
# default for the suites) unless a test asks for one (--userns auto):
# then the container gets the session's map (shim/runtime/joined_userns.c).
load helpers
load runtime_helpers

OCI_NAME=${ESBX_TEST_OCI:-runc}

setup_file() {
  command -v "$OCI_NAME" >/dev/null || skip "$OCI_NAME is not installed"
  OCI=$(oci_runtime "$OCI_NAME")
  export OCI
  if [ "$OCI_NAME" != runc ]; then
    export ESBX_RUNC=$OCI
  fi
  local rootfs=$BATS_FILE_TMPDIR/rootfs busybox=/bin/busybox a
  file -L "$busybox" | grep -q 'statically linked' || skip "needs busybox-static"
  mkdir -p "$rootfs"/{bin,proc,sys,dev,tmp,etc,work,w1,w2}
  cp "$busybox" "$rootfs/bin/busybox"
  for a in $("$busybox" --list); do
    [ "$a" = busybox ] || ln -sf /bin/busybox "$rootfs/bin/$a"
  done
  export ROOTFS=$rootfs
}

setup() {
  [ -x "$RT" ] || skip "esbx-runtime is not built"
  setup_store
  RUNC_ROOT=$BATS_TEST_TMPDIR/runc
  LOG=$BATS_TEST_TMPDIR/log.json
  export RUNC_ROOT LOG
}

teardown() {
  local id
  for id in $("$OCI" --root "$RUNC_ROOT" list -q 2>/dev/null); do
    "$RT" --root "$RUNC_ROOT" delete -f "$id" >/dev/null 2>&1 || true
  done
  # What esbx-runtime made for a joined container runc was left to delete.
  local d m
  for d in "$(joined_dir '')"*; do
    [ -d "$d" ] || continue
    for m in sys mqueue root; do umount -l "$d/$m" 2>/dev/null || true; done
    rm -rf "$d"
  done
  unmount_engine_roots
  umount -l "$BATS_TEST_TMPDIR/ram" 2>/dev/null || true
  if [ -d "$BATS_TEST_TMPDIR/crun" ]; then
    for id in $(crun --root "$BATS_TEST_TMPDIR/crun" list -q 2>/dev/null); do
      crun --root "$BATS_TEST_TMPDIR/crun" delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  kill_host_socket
  stop_holders
  teardown_store
}

# A project with one file and a session of it: `new_session NAME [OPTION...]`.
new_session() {
  if ! [ -d "$ESBX_ROOT/projects/p" ]; then
    make_tree "$BATS_TEST_TMPDIR/tree"
    esbx_ok project create p --from "$BATS_TEST_TMPDIR/tree"
  fi
  esbx_ok session create p --name "$@"
}

merged() {
  echo "$ESBX_ROOT/sessions/$1/merged"
}

# make_bundle DIR 'ARGS as a JSON array' [MOUNT_SOURCE DEST]...
make_bundle() {
  local dir=$1 args=$2 mounts='[]'
  shift 2
  while [ $# -ge 2 ]; do
    mounts=$(jq -c --arg s "$1" --arg d "$2" \
      '. + [{"destination": $d, "type": "bind", "source": $s, "options": ["rbind", "rw"]}]' \
      <<<"$mounts")
    shift 2
  done
  mkdir -p "$dir"
  (cd "$dir" && "$OCI" spec)
  jq --arg root "$ROOTFS" --argjson args "$args" --argjson mounts "$mounts" \
    '.root.path = $root | .process.terminal = false | .process.args = $args
     | .mounts += $mounts' "$dir/config.json" >"$dir/config.json.new"
  mv "$dir/config.json.new" "$dir/config.json"
}

# The runtime as the containerd shim calls it.  The container inherits
# stdio from `create`: keep it off bats' pipes.
rt_create() {
  local id=$1 bundle=$2
  "$RT" --root "$RUNC_ROOT" --log "$LOG" --log-format json create --bundle "$bundle" \
    --pid-file "$BATS_TEST_TMPDIR/$id.pid" "$id" </dev/null >"$BATS_TEST_TMPDIR/$id.out" 2>&1
}

rt_create_ok() {
  if ! rt_create "$@"; then
    echo "create $1 failed:" >&2
    cat "$BATS_TEST_TMPDIR/$1.out" "$LOG" >&2 || true
    return 1
  fi
}

rt_start() {
  "$RT" --root "$RUNC_ROOT" --log "$LOG" --log-format json start "$1"
}

# Through esbx-runtime, as the containerd shim calls it for `docker exec`.
in_ctr() {
  "$RT" --root "$RUNC_ROOT" exec "$@" </dev/null
}

containers() {
  "$OCI" --root "$RUNC_ROOT" list -q
}

# The last error line of the --log file, as the containerd shim reads it.
last_error() {
  grep '"level":"error"' "$LOG" | tail -n 1 | jq -r .msg
}

wait_stopped() {
  local i
  for i in $(seq 50); do
    [ "$("$OCI" --root "$RUNC_ROOT" state "$1" | jq -r .status)" = stopped ] && return 0
    sleep 0.1
  done
  return 1
}

@test "runtime: two containers of one session share uts, ipc and net namespaces, not pid" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1002"]' "$(merged s1)" /work
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  rt_create_ok c2 "$BATS_TEST_TMPDIR/b2"
  rt_start c2

  # Each container sees its own processes only.
  run in_ctr c2 ps -o args
  assert_success
  refute_output --partial "sleep 1001"
  assert_output --partial "sleep 1002"
  refute_output --partial esbx-holder

  run in_ctr c1 hostname
  assert_output s1
  run in_ctr c2 hostname
  assert_output s1

  local ns one holder
  holder=$(holder_pid s1)
  for ns in net uts ipc; do
    run in_ctr c1 readlink /proc/self/ns/$ns
    one=$output
    assert_equal "$one" "$(readlink "/proc/$holder/ns/$ns")"
    run in_ctr c2 readlink /proc/self/ns/$ns
    assert_equal "$output" "$one"
  done
  run in_ctr c1 readlink /proc/self/ns/pid
  one=$output
  refute [ "$one" = "$(readlink "/proc/$holder/ns/pid")" ]
  run in_ctr c2 readlink /proc/self/ns/pid
  refute [ "$output" = "$one" ]
  # The session cgroup still holds both: esbx ps lists them.
  esbx_ok ps s1
  assert_output --partial "sleep 1001"
  assert_output --partial "sleep 1002"
  # The session's files are where the volume put them.
  run in_ctr c1 cat /work/README
  assert_output hello
}

@test "runtime: the rewritten config joins the holder and names the session" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  jq '.hostname = "x" | .linux.cgroupsPath = "/docker/c1"' "$BATS_TEST_TMPDIR/b1/config.json" \
    >"$BATS_TEST_TMPDIR/c" && mv "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  local cfg=$BATS_TEST_TMPDIR/b1/config.json pid
  pid=$(jq -r '.linux.namespaces[] | select(.type == "uts") | .path' "$cfg" | cut -d/ -f3)
  [ -n "$pid" ] && kill -0 "$pid"
  assert_equal "$pid" "$(holder_pid s1)"
  run jq -r '.linux.namespaces[] | "\(.type) \(.path)"' "$cfg"
  # The pid namespace stays the container's own.
  assert_line "pid null"
  assert_line "network /proc/$pid/ns/net"
  assert_line "uts /proc/$pid/ns/uts"
  assert_line "ipc /proc/$pid/ns/ipc"
  assert_line "mount null"
  run jq -r '.hostname' "$cfg"
  assert_output null
  run jq -r '.annotations["io.esbx.session"]' "$cfg"
  assert_output s1
  run jq -r '.linux.cgroupsPath' "$cfg"
  assert_output --regexp '^/esbx/(.*\.)?s1/c1$'
  # create recorded the attachment, delete the detachment.
  run grep '"container-attached"' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output --partial '"container":"c1"'
  assert_output --partial "\"holder\":$pid"
  "$RT" --root "$RUNC_ROOT" delete c1
  run grep '"container-detached"' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output --partial '"container":"c1"'
}

@test "runtime: a process left by a container ends with the container, as with runc" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sh", "-c", "sleep 1003 & exit 0"]' "$(merged s1)" /work
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  wait_stopped c1
  # Its pid namespace went with its init: nothing is left in the session.
  local i
  for i in $(seq 50); do
    "$ESBX" ps s1 | grep -q "sleep 1003" || break
    sleep 0.1
  done
  esbx_ok ps s1
  refute_output --partial "sleep 1003"
}

@test "runtime: run --detach goes through the same rewrite" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  "$RT" --root "$RUNC_ROOT" run --detach --bundle "$BATS_TEST_TMPDIR/b1" c1 \
    </dev/null >/dev/null 2>&1
  run in_ctr c1 hostname
  assert_output s1
}

@test "runtime: a container gets the session's env where its config lacks the key" {
  new_session s1 --env FROM_SESSION=yes --env PATH=/session/bin --env TERM=session \
    --env HOME=/session/home
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  jq '.process.env += ["OWN=container"]' "$BATS_TEST_TMPDIR/b1/config.json" >"$BATS_TEST_TMPDIR/c"
  mv "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  run jq -r '.process.env[]' "$BATS_TEST_TMPDIR/b1/config.json"
  assert_line "FROM_SESSION=yes"
  assert_line "OWN=container"
  assert_line "TERM=xterm"
  refute_line "TERM=session"
  refute_line "PATH=/session/bin"
  refute_line --partial "HOME="
  assert_equal "$(grep -c '^PATH=' <<<"$output")" 1
  rt_start c1
  run in_ctr c1 sh -c 'echo "$FROM_SESSION $OWN $TERM"'
  assert_output "yes container xterm"
}

@test "runtime: the session's env sets no loader variable in a container unless it asks" {
  # A session's creator (a manage token of one project) must not decide
  # which code a container, started by someone else with its own
  # credentials, loads: LD_PRELOAD naming a library in the workspace would
  # run in the container before its command.
  new_session s1 --env LD_PRELOAD=/work/evil.so --env LD_LIBRARY_PATH=/work/lib \
    --env BASH_ENV=/work/rc --env PYTHONPATH=/work/py --env NODE_OPTIONS=--require=/work/x \
    --env GCONV_PATH=/work/gconv --env PLAIN=kept
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  run jq -r '.process.env[]' "$BATS_TEST_TMPDIR/b1/config.json"
  assert_line PLAIN=kept
  refute_line --partial LD_PRELOAD
  refute_line --partial LD_LIBRARY_PATH
  refute_line --partial BASH_ENV
  refute_line --partial PYTHONPATH
  refute_line --partial NODE_OPTIONS
  refute_line --partial GCONV_PATH
  # What was held back is in the attachment's event.
  run grep '"container-attached"' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output --partial '"env_withheld":["BASH_ENV","GCONV_PATH","LD_LIBRARY_PATH","LD_PRELOAD","NODE_OPTIONS","PYTHONPATH"]'
  # A container that asks (ESBX_SESSION_LOADER_ENV=1 in its own env) gets them.
  make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1002"]' "$(merged s1)" /work
  jq '.process.env += ["ESBX_SESSION_LOADER_ENV=1"]' "$BATS_TEST_TMPDIR/b2/config.json" \
    >"$BATS_TEST_TMPDIR/c" && mv "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/b2/config.json"
  rt_create_ok c2 "$BATS_TEST_TMPDIR/b2"
  run jq -r '.process.env[]' "$BATS_TEST_TMPDIR/b2/config.json"
  assert_line LD_PRELOAD=/work/evil.so
  assert_line BASH_ENV=/work/rc
  assert_line PLAIN=kept
  # The session's own commands get the session's env as it was asked.
  esbx_ok exec s1 -- sh -c 'echo "$BASH_ENV"'
  assert_line /work/rc
}

@test "runtime: a container without esbx mounts gets its config.json byte for byte" {
  new_session s1
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$BATS_TEST_TMPDIR/elsewhere" /work
  cp "$BATS_TEST_TMPDIR/b1/config.json" "$BATS_TEST_TMPDIR/orig.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  cmp "$BATS_TEST_TMPDIR/orig.json" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_start c1
  run in_ctr c1 hostname
  # The spec's own hostname: "runc" or "crun".
  assert_output "$OCI_NAME"
  [ ! -e "$ESBX_ROOT/runtime/c1" ]
}

@test "runtime: global flags as --flag=value, and -b / --bundle=" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1002"]' "$(merged s1)" /work
  "$RT" --root="$RUNC_ROOT" --log="$LOG" --log-format=json --debug create \
    -b "$BATS_TEST_TMPDIR/b1" c1 </dev/null >/dev/null 2>&1
  # runc (Go's flag package) also takes -root; crun (argp) does not.
  local root_flag=-root
  [ "$OCI_NAME" = runc ] || root_flag=--root
  (cd "$BATS_TEST_TMPDIR/b2" && "$RT" "$root_flag" "$RUNC_ROOT" create c2 </dev/null >/dev/null 2>&1)
  run containers
  assert_line c1
  assert_line c2
  run jq -r '.annotations["io.esbx.session"]' "$BATS_TEST_TMPDIR/b1/config.json"
  assert_output s1
  run jq -r '.annotations["io.esbx.session"]' "$BATS_TEST_TMPDIR/b2/config.json"
  assert_output s1
}

# A stand-in runc that records its arguments: `fake_runc [NAME]`, NAME runc
# (the default) or crun.
fake_runc() {
  local dir=$BATS_TEST_TMPDIR/fake name=${1:-runc}
  mkdir -p "$dir"
  cat >"$dir/$name" <<EOF
#!/bin/sh
for a in "\$@"; do printf '%s\n' "\$a"; done >"$dir/argv"
echo fake runc
EOF
  chmod +x "$dir/$name"
  echo "$dir/$name"
}

@test "runtime: other verbs reach runc with the original arguments" {
  local fake argv
  fake=$(fake_runc)
  argv=$BATS_TEST_TMPDIR/fake/argv
  for cmd in "--root /r --log /l --log-format json --systemd-cgroup start c1" \
    "--root=/r kill c1 KILL" "--debug state c1" "exec --process /p --detach --pid-file /f c1" \
    "update --resources=- c1" "features" "--version" "pause c1" "ps c1" \
    "--root /r delete --force c1" "checkpoint c1"; do
    # shellcheck disable=SC2086
    ESBX_RUNC=$fake run "$RT" $cmd
    assert_success
    assert_output "fake runc"
    run cat "$argv"
    assert_output "$(printf '%s\n' $cmd)"
  done
}

@test "runtime: runc comes from ESBX_RUNC, runtime.conf, then PATH without itself" {
  local fake
  fake=$(fake_runc)
  mkdir -p "$BATS_TEST_TMPDIR/path"
  # esbx-runtime installed as `runc` first on PATH must not exec itself.
  ln -s "$RT" "$BATS_TEST_TMPDIR/path/runc"
  ESBX_RUNC='' PATH=$BATS_TEST_TMPDIR/path:$BATS_TEST_TMPDIR/fake:$PATH run "$RT" state c1
  assert_output "fake runc"
  printf '# test\nrunc = %s\nroot=%s\n' "$fake" "$ESBX_ROOT" >"$BATS_TEST_TMPDIR/runtime.conf"
  ESBX_RUNC='' ESBX_RUNTIME_CONF=$BATS_TEST_TMPDIR/runtime.conf run "$RT" state c1
  assert_output "fake runc"
  printf 'bogus\n' >"$BATS_TEST_TMPDIR/bad.conf"
  ESBX_RUNC='' ESBX_RUNTIME_CONF=$BATS_TEST_TMPDIR/bad.conf run "$RT" state c1
  assert_failure 1
  assert_output --partial 'expected `key = value`'
}

@test "runtime: crun on PATH serves when there is no runc, esbx-runtime as crun skipped" {
  local fake
  fake=$(fake_runc crun)
  mkdir -p "$BATS_TEST_TMPDIR/path"
  ln -s "$RT" "$BATS_TEST_TMPDIR/path/crun"
  ESBX_RUNC='' PATH=$BATS_TEST_TMPDIR/path:$BATS_TEST_TMPDIR/fake run "$RT" state c1
  assert_success
  assert_output "fake runc"
  ESBX_RUNC='' PATH=$BATS_TEST_TMPDIR/path run "$RT" state c1
  assert_failure 1
  assert_output --partial "neither runc nor crun found"
}

@test "runtime: runtime.conf names the store root" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  printf 'root=%s\n' "$ESBX_ROOT" >"$BATS_TEST_TMPDIR/runtime.conf"
  ESBX_ROOT='' ESBX_RUNTIME_CONF=$BATS_TEST_TMPDIR/runtime.conf rt_create_ok c1 \
    "$BATS_TEST_TMPDIR/b1"
  run jq -r '.annotations["io.esbx.session"]' "$BATS_TEST_TMPDIR/b1/config.json"
  assert_output s1
}

@test "runtime: config.json that is not JSON fails in the log, no container" {
  mkdir -p "$BATS_TEST_TMPDIR/b1"
  echo '{"ociVersion": ' >"$BATS_TEST_TMPDIR/b1/config.json"
  run rt_create c1 "$BATS_TEST_TMPDIR/b1"
  assert_failure 1
  run last_error
  assert_output --partial "config.json"
  assert_output --partial "invalid JSON"
  run containers
  assert_output ""
}

@test "runtime: a bundle that does not exist fails in the log, no container" {
  run rt_create c1 "$BATS_TEST_TMPDIR/nope"
  assert_failure 1
  run last_error
  assert_output --partial "$BATS_TEST_TMPDIR/nope"
  assert_output --partial "No such file or directory"
  grep -q '"time":"20' "$LOG"
  run containers
  assert_output ""
}

@test "runtime: a discarded session fails at create with that cause" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  cp "$BATS_TEST_TMPDIR/b1/config.json" "$BATS_TEST_TMPDIR/orig.json"
  esbx_ok discard s1
  run rt_create c1 "$BATS_TEST_TMPDIR/b1"
  assert_failure 1
  run last_error
  assert_output --partial "esbx session \`s1\`"
  assert_output --partial "discarded"
  cmp "$BATS_TEST_TMPDIR/orig.json" "$BATS_TEST_TMPDIR/b1/config.json"
  run containers
  assert_output ""
}

# `engine_root NAME`: a container root as Docker's overlay2 makes one, an
# overlay over $ROOTFS mounted from the layer directory with a relative
# lower (l/NAME) and an upper of its own: DIR/c/merged, echoed.
engine_root() {
  local home=$BATS_TEST_TMPDIR/ovl-$1
  mkdir -p "$home/l" "$home/c/diff" "$home/c/work" "$home/c/merged"
  ln -s "$ROOTFS" "$home/l/$1"
  (cd "$home" && mount -t overlay overlay \
    -o "lowerdir=l/$1,upperdir=$home/c/diff,workdir=$home/c/work" "$home/c/merged")
  echo "$home/c/merged"
}

unmount_engine_roots() {
  local m
  for m in "$BATS_TEST_TMPDIR"/ovl-*/c/merged; do
    [ -d "$m" ] && umount "$m" 2>/dev/null
  done
  return 0
}

# esbx-runtime's directory of a container ID of this test's runc root.
joined_dir() {
  echo "/run/esbx/containers/$(printf %s "$RUNC_ROOT" | sha256sum | cut -c1-8)-$1"
}

@test "runtime: a container joins a session in a user namespace with its map; owners are real on disk" {
  new_session s1 --userns auto
  local root
  root=$(engine_root img)
  make_bundle "$BATS_TEST_TMPDIR/b1" \
    '["sh", "-c", "echo x >/work/by-ctr && touch /etc/x && chown 1000:1001 /etc/x && exec sleep 1001"]' \
    "$(merged s1)" /work
  docker_like "$BATS_TEST_TMPDIR/b1"
  jq --arg r "$root" '.root = {path: $r, readonly: false}' "$BATS_TEST_TMPDIR/b1/config.json" \
    >"$BATS_TEST_TMPDIR/c.json" && mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  local i
  for i in $(seq 50); do
    [ -e "$(merged s1)/by-ctr" ] && [ -e "$BATS_TEST_TMPDIR/ovl-img/c/diff/etc/x" ] && break
    sleep 0.1
  done
  # One meaning of root on both sides.
  esbx_ok exec s1 -- cat /proc/self/uid_map
  local want=$output
  refute_output --regexp '^ *0 +0 '
  run in_ctr c1 cat /proc/self/uid_map
  assert_output "$want"
  run in_ctr c1 cat /proc/self/gid_map
  assert_output "$want"
  # An exec joins the session's uts (and net, ipc) namespaces, as create did.
  run in_ctr c1 hostname
  assert_output s1
  # What it wrote to the workspace: 0 on disk and for the session's root.
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/s1/upper/by-ctr"
  assert_output 0:0
  esbx_ok exec s1 -- stat -c '%u:%g' /workspace/by-ctr
  assert_output 0:0
  esbx_ok export s1 -o "$BATS_TEST_TMPDIR/s1.tar"
  run tar -tvf "$BATS_TEST_TMPDIR/s1.tar" --numeric-owner
  assert_line --regexp '^-rw-r--r-- 0/0 .* by-ctr$'
  # Its image is its root's: the write went to the engine's upper with the
  # ids the container gave it, the image itself untouched.
  run stat -c '%u:%g' "$BATS_TEST_TMPDIR/ovl-img/c/diff/etc/x"
  assert_output 1000:1001
  [ ! -e "$ROOTFS/etc/x" ]
  run in_ctr c1 sh -c 'stat -c %u:%g /etc/x /bin/busybox && echo y >/bin/new && rm /bin/new && echo rw'
  assert_output $'1000:1001\n0:0\nrw'
  # The engine's own overlay still shows the real owners.
  run stat -c '%u:%g' "$BATS_TEST_TMPDIR/ovl-img/c/merged/etc/x"
  assert_output 1000:1001
  # delete undoes everything made for it.
  local dir
  dir=$(joined_dir c1)
  [ -d "$dir" ]
  # Only the session's ids (and host root) pass its directory: another
  # host user cannot reach the container's root, its image or workspace.
  setpriv --reuid=65534 --regid=65534 --clear-groups true
  run setpriv --reuid=65534 --regid=65534 --clear-groups stat "$dir/root/bin/busybox"
  assert_failure
  assert_output --partial "Permission denied"
  "$OCI" --root "$RUNC_ROOT" kill c1 KILL
  wait_stopped c1
  "$RT" --root "$RUNC_ROOT" delete c1
  [ ! -e "$dir" ]
  run grep -c " $dir/" /proc/self/mountinfo
  assert_output 0
  [ ! -e "$BATS_TEST_TMPDIR/ovl-img/c/esbx-work" ]
  unmount_engine_roots
}

@test "runtime: a joined container of a userns session cannot signal or read another session's process" {
  new_session s1 --userns auto
  new_session s2 --userns auto
  esbx_ok exec -d s2 -- sleep 4244
  local victim pid i
  for i in $(seq 50); do
    victim=$(pgrep -x -f "sleep 4244") && break
    sleep 0.1
  done
  [ -n "$victim" ]
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  docker_like "$BATS_TEST_TMPDIR/b1"
  jq '.root.readonly = false' "$BATS_TEST_TMPDIR/b1/config.json" >"$BATS_TEST_TMPDIR/c.json" &&
    mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  pid=$(cat "$BATS_TEST_TMPDIR/c1.pid")
  # The container's credentials, in the host's pid namespace where they
  # can name s2's process: root of the container is not root of the host.
  local attacker=(nsenter --target "$pid" --user --setuid 0 --setgid 0 --)
  run "${attacker[@]}" cat /proc/self/uid_map
  refute_output --regexp '^ *0 +0 '
  run "${attacker[@]}" kill -9 "$victim"
  assert_failure
  assert_output --partial 'not permitted'
  run "${attacker[@]}" cat "/proc/$victim/environ"
  assert_failure
  kill -0 "$victim"
}

@test "runtime: a joined container and a userns session's command cannot read each other's environ" {
  new_session s1 --userns auto
  esbx_ok exec s1 --detach --env SESSION_TOKEN=session-env-5e1d -- sleep 1002
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  docker_like "$BATS_TEST_TMPDIR/b1" CTR_TOKEN=ctr-credential-77c0
  jq '.root.readonly = false' "$BATS_TEST_TMPDIR/b1/config.json" >"$BATS_TEST_TMPDIR/c.json" &&
    mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b1/config.json"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  run in_ctr c1 sh -c 'echo "$CTR_TOKEN"
    for p in /proc/[0-9]*; do tr "\0" "\n" <"$p/environ" 2>/dev/null | grep SESSION_TOKEN; done
    ps -o args | grep "sleep 100[2]"; true'
  assert_success
  assert_output ctr-credential-77c0
  run "$ESBX" exec s1 -- sh -c '
    for p in /proc/[0-9]*; do tr "\0" "\n" <"$p/environ" 2>/dev/null | grep CTR_TOKEN; done
    ps -o args | grep "sleep 100[1]"; true'
  assert_success
  refute_output --partial ctr-credential-77c0
  refute_output --partial "sleep 1001"
}

@test "runtime: joining a userns session is refused for a container with a user namespace of its own, or a root that cannot idmap" {
  new_session s1 --userns auto
  # Docker's userns-remap asks for a map of its own.
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  jq '.linux.namespaces += [{"type": "user"}]
      | .linux.uidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]
      | .linux.gidMappings = [{"containerID": 0, "hostID": 100000, "size": 65536}]' \
    "$BATS_TEST_TMPDIR/b1/config.json" >"$BATS_TEST_TMPDIR/c.json" &&
    mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b1/config.json"
  cp "$BATS_TEST_TMPDIR/b1/config.json" "$BATS_TEST_TMPDIR/orig.json"
  run rt_create c1 "$BATS_TEST_TMPDIR/b1"
  assert_failure 1
  run last_error
  assert_output --partial "esbx session \`s1\` runs in a user namespace"
  assert_output --partial "userns-remap"
  cmp "$BATS_TEST_TMPDIR/orig.json" "$BATS_TEST_TMPDIR/b1/config.json"
  # A root on a filesystem that cannot idmap (ramfs).
  local ram=$BATS_TEST_TMPDIR/ram
  mkdir -p "$ram"
  mount -t ramfs ramfs "$ram"
  cp -a "$ROOTFS/." "$ram/"
  make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1001"]' "$(merged s1)" /work
  jq --arg r "$ram" '.root.path = $r' "$BATS_TEST_TMPDIR/b2/config.json" >"$BATS_TEST_TMPDIR/c.json" &&
    mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b2/config.json"
  run rt_create c2 "$BATS_TEST_TMPDIR/b2"
  umount "$ram"
  assert_failure 1
  run last_error
  assert_output --partial "esbx session \`s1\` runs in a user namespace"
  assert_output --partial "ramfs cannot be idmapped"
  [ "$(wc -l <<<"$output")" -eq 1 ]
  run containers
  assert_output ""
  [ ! -e "$(joined_dir c1)" ] && [ ! -e "$(joined_dir c2)" ]
}

@test "runtime: what a joined container left behind its runtime's back goes at the next create" {
  new_session s1 --userns auto
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  jq '.root.readonly = false' "$BATS_TEST_TMPDIR/b1/config.json" >"$BATS_TEST_TMPDIR/c.json" &&
    mv "$BATS_TEST_TMPDIR/c.json" "$BATS_TEST_TMPDIR/b1/config.json"
  cp -r "$BATS_TEST_TMPDIR/b1" "$BATS_TEST_TMPDIR/b2"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  local dir
  dir=$(joined_dir c1)
  grep -q " $dir/root " /proc/self/mountinfo
  # The engine deletes through runc itself (or dies): no delete of ours.
  "$OCI" --root "$RUNC_ROOT" delete -f c1
  [ -d "$dir" ]
  rt_create_ok c2 "$BATS_TEST_TMPDIR/b2"
  [ ! -e "$dir" ]
  run grep -c " $dir/" /proc/self/mountinfo
  assert_output 0
  [ -d "$(joined_dir c2)" ]
  "$OCI" --root "$RUNC_ROOT" delete -f c2
  "$RT" --root "$RUNC_ROOT" delete c2 2>/dev/null || true
}

@test "runtime: mounts of two sessions are refused" {
  new_session s1
  new_session s2
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /w1 "$(merged s2)" /w2
  cp "$BATS_TEST_TMPDIR/b1/config.json" "$BATS_TEST_TMPDIR/orig.json"
  run rt_create c1 "$BATS_TEST_TMPDIR/b1"
  assert_failure 1
  run last_error
  assert_output --partial "two esbx sessions"
  cmp "$BATS_TEST_TMPDIR/orig.json" "$BATS_TEST_TMPDIR/b1/config.json"
  run containers
  assert_output ""
}

@test "runtime: errors use runc's text format without --log-format json" {
  ESBX_RUNC=$(fake_runc) "$RT" --root "$RUNC_ROOT" --log "$LOG" create \
    --bundle "$BATS_TEST_TMPDIR/nope" c1 </dev/null >/dev/null 2>&1 || true
  run cat "$LOG"
  assert_output --regexp '^time="[0-9T:.Z-]+" level=error msg="open bundle `.*nope`: No such file or directory"$'
}

@test "runtime: errors use crun's text format, the bare message, when wrapping crun" {
  ESBX_RUNC=$(fake_runc crun) "$RT" --root "$RUNC_ROOT" --log "$LOG" create \
    --bundle "$BATS_TEST_TMPDIR/nope" c1 </dev/null >/dev/null 2>&1 || true
  run cat "$LOG"
  assert_output --regexp '^open bundle `.*nope`: No such file or directory$'
  # JSON lines are the same for both.
  ESBX_RUNC=$(fake_runc crun) "$RT" --root "$RUNC_ROOT" --log "$LOG.json" --log-format json \
    create --bundle "$BATS_TEST_TMPDIR/nope" c1 </dev/null >/dev/null 2>&1 || true
  run jq -r '"\(.level) \(.msg)"' "$LOG.json"
  assert_output --regexp '^error open bundle `.*nope`: No such file or directory$'
}

@test "runtime: --systemd-cgroup joins the namespaces but keeps Docker's cgroup path" {
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  jq '.linux.cgroupsPath = "system.slice:docker:c1"' "$BATS_TEST_TMPDIR/b1/config.json" \
    >"$BATS_TEST_TMPDIR/c" && mv "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/b1/config.json"
  local fake
  fake=$(fake_runc)
  ESBX_RUNC=$fake run "$RT" --systemd-cgroup --root "$RUNC_ROOT" create \
    --bundle "$BATS_TEST_TMPDIR/b1" c1
  assert_success
  run cat "$BATS_TEST_TMPDIR/fake/argv"
  assert_output "$(printf '%s\n' --systemd-cgroup --root "$RUNC_ROOT" create --bundle \
    "$BATS_TEST_TMPDIR/b1" c1)"
  run jq -r '.linux.cgroupsPath' "$BATS_TEST_TMPDIR/b1/config.json"
  assert_output "system.slice:docker:c1"
  run jq -r '.linux.namespaces[] | select(.type == "uts") | .path' \
    "$BATS_TEST_TMPDIR/b1/config.json"
  assert_output --regexp '^/proc/[0-9]+/ns/uts$'
  run grep '"container-attached"' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output --partial '"cgroup":null'
}

@test "runtime: crun's --cgroup-manager takes a value; systemd and disabled keep the cgroup path" {
  new_session s1
  local fake mgr cfg
  fake=$(fake_runc crun)
  for mgr in disabled systemd cgroupfs; do
    make_bundle "$BATS_TEST_TMPDIR/b-$mgr" '["sleep", "1001"]' "$(merged s1)" /work
    cfg=$BATS_TEST_TMPDIR/b-$mgr/config.json
    jq '.linux.cgroupsPath = "/libpod_parent/libpod-c1"' "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
    # podman: --runtime-arg --cgroup-manager --runtime-arg disabled
    ESBX_RUNC=$fake run "$RT" --cgroup-manager "$mgr" --root "$RUNC_ROOT" create \
      --bundle "$BATS_TEST_TMPDIR/b-$mgr" "c-$mgr"
    assert_success
    run cat "$BATS_TEST_TMPDIR/fake/argv"
    assert_output "$(printf '%s\n' --cgroup-manager "$mgr" --root "$RUNC_ROOT" create --bundle \
      "$BATS_TEST_TMPDIR/b-$mgr" "c-$mgr")"
    run jq -r '.linux.namespaces[] | select(.type == "ipc") | .path' "$cfg"
    assert_output --regexp '^/proc/[0-9]+/ns/ipc$'
    run jq -r '.linux.cgroupsPath' "$cfg"
    if [ "$mgr" = cgroupfs ]; then
      assert_output --regexp "^/esbx/(.*\.)?s1/c-$mgr\$"
    else
      assert_output /libpod_parent/libpod-c1
    fi
  done
  # --cgroup-manager=VALUE, one argument.
  make_bundle "$BATS_TEST_TMPDIR/b-eq" '["sleep", "1001"]' "$(merged s1)" /work
  ESBX_RUNC=$fake run "$RT" --cgroup-manager=systemd create --bundle "$BATS_TEST_TMPDIR/b-eq" c-eq
  assert_success
  run jq -r '.annotations["io.esbx.session"]' "$BATS_TEST_TMPDIR/b-eq/config.json"
  assert_output s1
  run grep -c '"cgroup":null' "$ESBX_ROOT/sessions/s1/events.jsonl"
  assert_output 3
}

@test "runtime: sixteen holders of one store start at once, three rounds" {
  # Holder starts are what races here, so runc itself is left out: the
  # launcher once read its holder's start time after the holder had mounted
  # the session's /proc over the namespace they share (1 in ~100 failed).
  local round i pids fails b
  for round in 1 2 3; do
    for i in $(seq 16); do
      new_session "r$i"
      make_bundle "$BATS_TEST_TMPDIR/r$i-$round" '["true"]' "$(merged "r$i")" /work
    done
    pids=()
    for i in $(seq 16); do
      b=$BATS_TEST_TMPDIR/r$i-$round
      ESBX_RUNC=/bin/true rt_create "r$i-$round" "$b" &
      pids+=($!)
    done
    fails=0
    for i in "${!pids[@]}"; do
      if ! wait "${pids[$i]}"; then
        fails=$((fails + 1))
        cat "$BATS_TEST_TMPDIR/r$((i + 1))-$round.out" >&2
      fi
    done
    assert_equal "$fails" 0
    for i in $(seq 16); do
      pid=$(holder_pid "r$i")
      [ "$(cat "/proc/$pid/comm")" = esbx-holder ] || fail "holder of r$i is not running"
      esbx_ok discard "r$i"
    done
  done
}

# The boundary between a session and the containers that join it.  A
# container keeps the session's network, uts and ipc namespaces but has a
# pid namespace of its own, so neither side can name the other's processes:
# no /proc/PID/environ, /proc/PID/root (the other side's private files, a
# socket bound into it, its /run/secrets) is reachable.  The containers get
# Docker's default capabilities, as `docker run` gives them, so that the
# ptrace access check the kernel makes for /proc/PID/* is the one a real
# container faces.
DOCKER_CAPS='["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FSETID","CAP_FOWNER","CAP_MKNOD",
  "CAP_NET_RAW","CAP_SETGID","CAP_SETUID","CAP_SETFCAP","CAP_SETPCAP",
  "CAP_NET_BIND_SERVICE","CAP_SYS_CHROOT","CAP_KILL","CAP_AUDIT_WRITE"]'

# `docker_like BUNDLE [ENV...]`: Docker's capabilities, a private tmpfs
# /tmp and ENV (KEY=VALUE) in the bundle's config.
docker_like() {
  local cfg=$1/config.json env
  shift
  env=$(printf '%s\n' "$@" | jq -R . | jq -sc 'map(select(. != ""))')
  jq --argjson caps "$DOCKER_CAPS" --argjson env "$env" \
    '.process.capabilities = {bounding: $caps, effective: $caps, permitted: $caps}
     | .process.env += $env
     | .mounts += [{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "nodev", "mode=1777"]}]' "$cfg" >"$cfg.new"
  mv "$cfg.new" "$cfg"
}

# A unix socket of the host in DIR/sock, answering one line to each client,
# as a Docker socket bound into a container would answer.  Killed at
# teardown through $BATS_TEST_TMPDIR/socket.pid.
host_socket() {
  /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b"host-socket-answer\n")
    c.close()
' "$1/sock" </dev/null >/dev/null 2>&1 &
  echo $! >"$BATS_TEST_TMPDIR/socket.pid"
  local i
  for i in $(seq 50); do
    [ -S "$1/sock" ] && return 0
    sleep 0.1
  done
  return 1
}

kill_host_socket() {
  [ -f "$BATS_TEST_TMPDIR/socket.pid" ] || return 0
  kill "$(cat "$BATS_TEST_TMPDIR/socket.pid")" 2>/dev/null || true
}

@test "runtime: a session command cannot read a joined container's environ, root or bound socket" {
  new_session s1
  local host=$BATS_TEST_TMPDIR/host
  mkdir -p "$host"
  host_socket "$host"
  make_bundle "$BATS_TEST_TMPDIR/b1" \
    '["sh", "-c", "echo container-private >/tmp/private && exec sleep 1001"]' \
    "$(merged s1)" /work "$host" /host
  docker_like "$BATS_TEST_TMPDIR/b1" CTR_TOKEN=ctr-credential-4f1e
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  # What the container holds, seen from inside it.
  local i
  for i in $(seq 50); do
    in_ctr c1 cat /tmp/private >/dev/null 2>&1 && break
    sleep 0.1
  done
  run in_ctr c1 sh -c 'cat /tmp/private; echo "$CTR_TOKEN"; [ -S /host/sock ] && echo socket'
  assert_output --partial container-private
  assert_output --partial ctr-credential-4f1e
  assert_output --partial socket

  # The session's command, uid 0 with Docker's capabilities, walks its /proc.
  run "$ESBX" exec s1 -- sh -c '
    for p in /proc/[0-9]*; do
      tr "\0" "\n" <"$p/environ" 2>/dev/null | grep CTR_TOKEN
      cat "$p/root/tmp/private" 2>/dev/null
      [ -S "$p/root/host/sock" ] && echo "socket at $p"
    done
    ps -o args | grep "sleep 100[1]"
    true'
  assert_success
  refute_output --partial ctr-credential-4f1e
  refute_output --partial container-private
  refute_output --partial socket
  refute_output --partial "sleep 1001"
  run "$ESBX" exec s1 -- python3 -c '
import glob, socket
for path in glob.glob("/proc/[0-9]*/root/host/sock"):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        print(s.recv(100).decode().strip(), "through", path)
    except OSError:
        pass
'
  assert_success
  refute_output --partial host-socket-answer
}

@test "runtime: a joined container cannot read the session's /run/secrets or a session command's environ" {
  printf 'session-secret-9c2d\n' | "$ESBX" secret create tok
  new_session s1 --secret tok
  esbx_ok exec s1 --detach --env SESSION_TOKEN=session-env-77ab -- sleep 1002
  esbx_ok exec s1 -- cat /run/secrets/tok
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1001"]' "$(merged s1)" /work
  docker_like "$BATS_TEST_TMPDIR/b1"
  rt_create_ok c1 "$BATS_TEST_TMPDIR/b1"
  rt_start c1
  run in_ctr c1 sh -c '
    for p in /proc/[0-9]*; do
      cat "$p/root/run/secrets/tok" 2>/dev/null
      tr "\0" "\n" <"$p/environ" 2>/dev/null | grep SESSION_TOKEN
    done
    ps -o args | grep "sleep 100[2]"
    true'
  assert_success
  refute_output --partial session-secret-9c2d
  refute_output --partial session-env-77ab
  refute_output --partial "sleep 1002"
}

@test "runtime: discard ends a container that lives outside the session cgroup" {
  # crun's --cgroup-manager disabled leaves the container in the engine's
  # cgroup, as the systemd managers do; without a pid namespace in common
  # with the holder, the session's ipc namespace is what finds it.
  command -v crun >/dev/null || skip "crun is not installed"
  local crun root=$BATS_TEST_TMPDIR/crun pid
  crun=$(oci_runtime crun)
  new_session s1
  make_bundle "$BATS_TEST_TMPDIR/b1" '["sleep", "1004"]' "$(merged s1)" /work
  ESBX_RUNC=$crun "$RT" --cgroup-manager disabled --root "$root" create \
    --bundle "$BATS_TEST_TMPDIR/b1" --pid-file "$BATS_TEST_TMPDIR/c1.pid" c1 \
    </dev/null >"$BATS_TEST_TMPDIR/c1.out" 2>&1 || {
    cat "$BATS_TEST_TMPDIR/c1.out" >&2
    false
  }
  "$crun" --cgroup-manager disabled --root "$root" start c1
  pid=$(cat "$BATS_TEST_TMPDIR/c1.pid")
  kill -0 "$pid"
  [ -e "$ESBX_ROOT/sessions/s1/containers-outside-cgroup" ]
  esbx_ok discard s1
  wait_gone "$pid"
}
