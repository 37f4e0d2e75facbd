#!/usr/bin/env bats
# esbx-runtime under dockerd: `docker run --runtime esbx -v S:/work` puts the
# container into the session's holder.  The runtime is registered in
# /etc/docker/daemon.json for this file only (the original content comes
# back at the end); each test adds its store root to /etc/esbx/runtime.conf
# and takes it out again.

load docker_helpers
load runtime_helpers

DAEMON_JSON=/etc/docker/daemon.json
RUNTIME_CONF=/etc/esbx/runtime.conf
LOCK=/run/esbx-runtime-test.lock

# Reload dockerd's configuration and wait until it knows runtime esbx (or,
# with "gone", no longer knows it).
reload_dockerd() {
  local want=$1 i
  kill -HUP "$(dockerd_pid)"
  for i in $(seq 100); do
    if docker info --format '{{json .Runtimes}}' | jq -e 'has("esbx")' >/dev/null; then
      [ "$want" = present ] && return 0
    else
      [ "$want" = gone ] && return 0
    fi
    sleep 0.1
  done
  echo "dockerd did not reload $DAEMON_JSON" >&2
  return 1
}

register_runtime() {
  (
    flock 9
    if [ -f "$DAEMON_JSON" ]; then
      cp -p "$DAEMON_JSON" "$BATS_FILE_TMPDIR/daemon.json.orig"
    fi
    local cur='{}'
    [ -s "$DAEMON_JSON" ] && cur=$(cat "$DAEMON_JSON")
    jq --arg p "$RT" '.runtimes.esbx = {"path": $p}' <<<"$cur" >"$DAEMON_JSON.new"
    mv "$DAEMON_JSON.new" "$DAEMON_JSON"
    cp "$DAEMON_JSON" "$BATS_FILE_TMPDIR/daemon.json.ours"
  ) 9>"$LOCK"
  reload_dockerd present
}

# The original file when nobody changed it since; otherwise only our entry
# comes out, so that a concurrent suite keeps its own changes.
unregister_runtime() {
  (
    flock 9
    if cmp -s "$DAEMON_JSON" "$BATS_FILE_TMPDIR/daemon.json.ours"; then
      if [ -f "$BATS_FILE_TMPDIR/daemon.json.orig" ]; then
        cp -p "$BATS_FILE_TMPDIR/daemon.json.orig" "$DAEMON_JSON"
      else
        rm -f "$DAEMON_JSON"
      fi
      # dockerd keeps its old configuration when the file is missing:
      # reload from an empty one first (the file goes after the reload).
      [ -f "$DAEMON_JSON" ] || echo '{}' >"$DAEMON_JSON"
    elif [ -f "$DAEMON_JSON" ]; then
      jq 'del(.runtimes.esbx) | if .runtimes == {} then del(.runtimes) else . end' \
        "$DAEMON_JSON" >"$DAEMON_JSON.new" && mv "$DAEMON_JSON.new" "$DAEMON_JSON"
    fi
  ) 9>"$LOCK"
  if [ -f "$BATS_FILE_TMPDIR/daemon.json.orig" ] &&
    jq -e '.runtimes.esbx' "$BATS_FILE_TMPDIR/daemon.json.orig" >/dev/null; then
    kill -HUP "$(dockerd_pid)"
  else
    reload_dockerd gone
  fi
  if ! [ -f "$BATS_FILE_TMPDIR/daemon.json.orig" ] && [ "$(cat "$DAEMON_JSON" 2>/dev/null)" = '{}' ]; then
    rm -f "$DAEMON_JSON"
  fi
}

conf_add_root() {
  (
    flock 9
    mkdir -p "$(dirname "$RUNTIME_CONF")"
    printf 'root=%s\n' "$ESBX_ROOT" >>"$RUNTIME_CONF"
  ) 9>"$LOCK"
}

conf_remove_root() {
  [ -n "${ESBX_ROOT:-}" ] && [ -f "$RUNTIME_CONF" ] || return 0
  (
    flock 9
    grep -vxF "root=$ESBX_ROOT" "$RUNTIME_CONF" >"$RUNTIME_CONF.new" || true
    if [ -s "$RUNTIME_CONF.new" ]; then
      mv "$RUNTIME_CONF.new" "$RUNTIME_CONF"
    else
      # The file (and /etc/esbx) existed only for this test.
      rm -f "$RUNTIME_CONF.new" "$RUNTIME_CONF"
      rmdir "$(dirname "$RUNTIME_CONF")" 2>/dev/null || true
    fi
  ) 9>"$LOCK"
}

setup_file() {
  [ -x "$RT" ] || skip "esbx-runtime is not built at $RT"
  setup_docker_file
  register_runtime
}

teardown_file() {
  unregister_runtime
}

setup() {
  setup_docker
  conf_add_root
  make_project demo
  # Volume names are global in dockerd: unique per test, like the driver.
  S1=${DRIVER}s1
  S2=${DRIVER}s2
}

teardown() {
  # The shared file first: nothing after this may leave it pointing at a
  # removed store, even if a docker call hangs.
  conf_remove_root
  # Containers before holders: their cgroups sit under the session's.
  teardown_docker_containers
  stop_holders
  # By name: a volume whose session was discarded behind Docker's back is
  # no longer in the plugin's list, so teardown_docker would not see it.
  local v
  if [ -f "$BATS_TEST_TMPDIR/volumes" ]; then
    while read -r v; do
      timeout 30 docker volume rm -f "$v" >/dev/null 2>&1 || true
    done <"$BATS_TEST_TMPDIR/volumes"
  fi
  teardown_docker
}

teardown_docker_containers() {
  local c
  for c in $(docker ps -aq --filter "label=esbx-test=${DRIVER:-none}" 2>/dev/null); do
    docker rm -f "$c" >/dev/null 2>&1 || true
  done
}

# `mkvol NAME`: an esbx volume (session) of project demo, remembered for
# teardown.
mkvol() {
  echo "$1" >>"$BATS_TEST_TMPDIR/volumes"
  docker volume create -d "$DRIVER" -o project=demo "$1" >/dev/null
}

@test "runtime/docker: containers of one session share hostname, files and network, not processes" {
  mkvol "$S1"
  dstart a1 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" sleep 300
  dstart a2 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" sleep 301

  run docker exec "a1-$DRIVER" ps -o args
  assert_success
  assert_output --partial "sleep 300"
  refute_output --partial "sleep 301"
  run docker exec "a1-$DRIVER" readlink /proc/self/ns/net
  assert_output "$(readlink "/proc/$(holder_pid "$S1")/ns/net")"
  run docker exec "a2-$DRIVER" hostname
  assert_output "$S1"
  run docker exec "a1-$DRIVER" cat /work/README
  assert_output hello
  docker exec "a1-$DRIVER" sh -c 'echo private > /work/new'
  run docker exec "a2-$DRIVER" cat /work/new
  assert_output private
  # The session's commands run in the holder's pid namespace, which holds
  # no container; esbx ps lists the session cgroup, which holds both.
  run "$ESBX" exec "$S1" -- ps -o args
  assert_success
  refute_output --partial "sleep 300"
  refute_output --partial "sleep 301"
  esbx_ok ps "$S1"
  assert_output --partial "sleep 300"
  assert_output --partial "sleep 301"
  # Both attachments are in the session's event log.
  run grep -c '"container-attached"' "$ESBX_ROOT/sessions/$S1/events.jsonl"
  assert_output 2
}

@test "runtime/docker: a session command cannot read a container's -e credential or files; nor the reverse" {
  printf 'session-secret-51aa\n' | "$ESBX" secret create tok
  echo "$S1" >>"$BATS_TEST_TMPDIR/volumes"
  docker volume create -d "$DRIVER" -o project=demo -o secret=tok "$S1" >/dev/null
  dstart a1 --runtime esbx -v "$S1":/work -e CTR_TOKEN=ctr-credential-0d9e "$ESBX_TEST_IMAGE" \
    sh -c 'echo container-private >/tmp/private && exec sleep 300'
  esbx_ok exec "$S1" --detach --env SESSION_TOKEN=session-env-3b7c -- sleep 302
  run docker exec "a1-$DRIVER" sh -c 'sleep 0.2; cat /tmp/private; echo "$CTR_TOKEN"'
  assert_output "$(printf 'container-private\nctr-credential-0d9e')"
  run "$ESBX" exec "$S1" -- sh -c '
    for p in /proc/[0-9]*; do
      tr "\0" "\n" <"$p/environ" 2>/dev/null | grep CTR_TOKEN
      cat "$p/root/tmp/private" 2>/dev/null
    done; true'
  assert_success
  refute_output --partial ctr-credential-0d9e
  refute_output --partial container-private
  run docker exec "a1-$DRIVER" sh -c '
    for p in /proc/[0-9]*; do
      cat "$p/root/run/secrets/tok" 2>/dev/null
      tr "\0" "\n" <"$p/environ" 2>/dev/null | grep SESSION_TOKEN
    done; true'
  assert_success
  refute_output --partial session-secret-51aa
  refute_output --partial session-env-3b7c
}

@test "runtime/docker: the session account holds the containers' processes" {
  mkvol "$S1"
  dstart a1 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" \
    sh -c 'head -c 20000000 /dev/zero > /dev/shm/fill; sleep 300'
  sleep 1
  run "$ESBX" session inspect "$S1" --json
  assert_success
  local mem pids
  mem=$(jq -r '.runtime.memory.current' <<<"$output")
  pids=$(jq -r '.runtime.pids.current' <<<"$output")
  # 20 MB in the container's /dev/shm count in the session's account, and
  # so do its processes: the holder and at least the container's sleep.
  if ! [ "$mem" -gt 15000000 ] || ! [ "$pids" -ge 2 ]; then
    echo "session inspect: $output" >&2
    false
  fi
}

@test "runtime/docker: docker stop and rm leave the holder; volume rm ends it" {
  mkvol "$S1"
  dstart a1 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" sh -c 'sleep 1234 & exec sleep 300'
  local pid
  pid=$(holder_pid "$S1")
  kill -0 "$pid"
  docker stop -t 1 "a1-$DRIVER" >/dev/null
  docker rm "a1-$DRIVER" >/dev/null
  kill -0 "$pid"
  run grep -c '"container-detached"' "$ESBX_ROOT/sessions/$S1/events.jsonl"
  assert_output 1
  # A later container still finds the same holder.
  dstart a2 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" sleep 301
  assert_equal "$(holder_pid "$S1")" "$pid"
  docker rm -f "a2-$DRIVER" >/dev/null
  docker volume rm "$S1" >/dev/null
  local i
  for i in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  run kill -0 "$pid"
  assert_failure
}

@test "runtime/docker: esbx discard ends the containers of the session" {
  mkvol "$S1"
  dstart a1 --runtime esbx -v "$S1":/work "$ESBX_TEST_IMAGE" sleep 300
  local pid
  pid=$(holder_pid "$S1")
  esbx_ok discard "$S1"
  # Gone, or a zombie its parent (the container's shim) has not reaped yet.
  wait_gone "$pid"
  local i
  for i in $(seq 50); do
    [ "$(docker inspect -f '{{.State.Running}}' "a1-$DRIVER")" = false ] && break
    sleep 0.1
  done
  run docker inspect -f '{{.State.Running}}' "a1-$DRIVER"
  assert_output false
}

@test "runtime/docker: a container without esbx volumes runs as with runc" {
  run docker run --rm --label "esbx-test=$DRIVER" --runtime esbx --hostname plain \
    "$ESBX_TEST_IMAGE" hostname
  assert_success
  assert_output plain
}

@test "runtime/docker: two sessions in one container fail with the cause, no container" {
  mkvol "$S1"
  mkvol "$S2"
  run drun --runtime esbx -v "$S1":/a -v "$S2":/b "$ESBX_TEST_IMAGE" true
  assert_failure
  assert_output --partial "two esbx sessions"
  run docker ps -aq --filter "label=esbx-test=$DRIVER"
  assert_output ""
  # Neither session got a holder from the failed create.
  [ ! -s "$ESBX_ROOT/sessions/$S1/holder.json" ] || ! kill -0 "$(holder_pid "$S1")" 2>/dev/null
}

@test "runtime/docker: a container joins a volume in a user namespace with its map; nothing stays mounted after rm" {
  mkvol "$S1"
  esbx_ok session inspect "$S1"
  assert_output --partial '"requested": "off"'
  echo "$S2" >>"$BATS_TEST_TMPDIR/volumes"
  docker volume create -d "$DRIVER" -o project=demo -o userns=auto "$S2" >/dev/null
  esbx_ok exec "$S2" -- cat /proc/self/uid_map
  local want=$output
  refute_output --regexp '^ *0 +0 '
  dstart a1 --runtime esbx -v "$S2":/work -e CTR_TOKEN=ctr-credential-91ab "$ESBX_TEST_IMAGE" \
    sh -c 'echo x >/work/by-ctr && touch /etc/x && chown 1000:1000 /etc/x && exec sleep 300'
  local id
  id=$(docker inspect -f '{{.Id}}' "a1-$DRIVER")
  run docker exec "a1-$DRIVER" sh -c 'sleep 0.3; cat /proc/self/uid_map; stat -c %u:%g /etc/x /work/by-ctr'
  assert_output "$(printf '%s\n1000:1000\n0:0' "$want")"
  run stat -c '%u:%g' "$ESBX_ROOT/sessions/$S2/upper/by-ctr"
  assert_output 0:0
  esbx_ok exec "$S2" -- stat -c '%u:%g' /workspace/by-ctr
  assert_output 0:0
  # Round 2's attack, in the user namespace.
  run "$ESBX" exec "$S2" -- sh -c '
    for p in /proc/[0-9]*; do tr "\0" "\n" <"$p/environ" 2>/dev/null | grep CTR_TOKEN; done; true'
  assert_success
  refute_output --partial ctr-credential-91ab
  grep -q "/run/esbx/containers/[0-9a-f]*-$id/root " /proc/self/mountinfo
  docker rm -f "a1-$DRIVER" >/dev/null
  run grep -c "/run/esbx/containers/[0-9a-f]*-$id/" /proc/self/mountinfo
  assert_output 0
  run sh -c "ls -d /run/esbx/containers/*-$id 2>/dev/null"
  assert_output ""
  run docker volume create -d "$DRIVER" -o project=demo -o userns=maybe "${DRIVER}s3"
  assert_failure
  assert_output --partial 'option `userns`'
}

@test "runtime/docker: a session discarded behind Docker's back fails at create" {
  mkvol "$S1"
  local merged
  merged=$(merged_of "$S1")
  esbx_ok discard "$S1"
  # Docker checks that a bind source exists: give it one that is the
  # discarded session's path again, but no session.
  mkdir -p "$merged"
  run docker run --rm --label "esbx-test=$DRIVER" --runtime esbx -v "$merged:/work" \
    "$ESBX_TEST_IMAGE" true
  assert_failure
  assert_output --partial "esbx session \`$S1\`"
  assert_output --partial "discarded"
  run docker ps -aq --filter "label=esbx-test=$DRIVER"
  assert_output ""
  rmdir "$merged" "$(dirname "$merged")"
}

@test "runtime/docker: the compose agent swarm runs with runtime: esbx" {
  command -v docker-compose >/dev/null || skip "docker-compose is not installed"
  local project=c$DRIVER override=$BATS_TEST_TMPDIR/runtime.yml n
  cat >"$override" <<'YAML'
version: "3.8"
services:
  agent1:
    runtime: esbx
  agent2:
    runtime: esbx
  agent3:
    runtime: esbx
YAML
  # The stack's volumes exist beforehand, with the stack's driver and
  # options: compose then finds them by name instead of having dockerd ask
  # every volume driver it has ever seen about an unknown name (slow on a
  # dockerd that has outlived many test plugins).
  for n in 1 2 3; do
    mkvol "${project}_agent$n-ws"
  done
  COMPOSE_HTTP_TIMEOUT=300 ESBX_IMAGE=$ESBX_TEST_IMAGE ESBX_DRIVER=$DRIVER run docker-compose -p "$project" \
    -f "$ESBX_SRC/contrib/compose/agent-swarm.yml" -f "$override" up --no-color
  assert_success
  for n in 1 2 3; do
    run grep -c '"container-attached"' "$ESBX_ROOT/sessions/${project}_agent$n-ws/events.jsonl"
    assert_output 1
  done
  esbx_ok diff "${project}_agent1-ws" --json
  assert_output --partial /src/feature1.txt
  refute_output --partial /docs/feature2.md
  COMPOSE_HTTP_TIMEOUT=300 ESBX_IMAGE=$ESBX_TEST_IMAGE ESBX_DRIVER=$DRIVER run docker-compose -p "$project" \
    -f "$ESBX_SRC/contrib/compose/agent-swarm.yml" -f "$override" down -v -t 0
  assert_success
  esbx_ok --json session list
  assert_output "[]"
}

@test "runtime/docker: a container on --runtime esbx commits in a git project's session; publish makes the commit" {
  local image repo=$BATS_TEST_TMPDIR/repo
  image=$("$ESBX_SRC/hack/docker-test-image" --git)
  mkdir -p "$repo"
  git -C "$repo" init -q -b master
  printf 'one\n' >"$repo/f1"
  git -C "$repo" add f1
  git -C "$repo" -c user.name=T -c user.email=t@example.org commit -qm first
  esbx_ok project create gitp --from-git "$repo"
  echo "$S1" >>"$BATS_TEST_TMPDIR/volumes"
  docker volume create -d "$DRIVER" -o project=gitp "$S1" >/dev/null
  run docker run --rm --label "esbx-test=$DRIVER" --runtime esbx -v "$S1":/work "$image" \
    sh -c 'cd /work && git status --porcelain && echo two >>f1 &&
      git -c user.name=Runtime -c user.email=r@example.org commit -qam "on the runtime"'
  assert_success
  assert_output ""
  esbx_ok publish "$S1"
  git clone -q -b esbx/head "$("$ESBX" project git-dir gitp)" "$BATS_TEST_TMPDIR/clone"
  run git -C "$BATS_TEST_TMPDIR/clone" log -1 --format='%an %s'
  assert_output "Runtime on the runtime"
}
