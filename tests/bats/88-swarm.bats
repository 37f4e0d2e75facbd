#!/usr/bin/env bats
# esbx under Docker Swarm mode (docs/SCALE-OUT.md): three Docker daemons,
# each in network and mount namespaces of its own with esbxd as its
# `esbx` volume plugin, joined into one swarm; the registry and etcd in a
# fourth namespace (swarm_helpers.bash).  `docker stack deploy` of
# contrib/compose/agent-stack.yml puts $ESBX_SWARM_AGENTS (6) agents on
# the nodes, one session per task; a node is killed mid-run and its tasks
# come back on the others from their pushed snapshots.  The host's
# dockerd is not used.
#
# Run time: about a minute.  ESBX_SWARM_SOAK=SECONDS adds a soak: rounds
# of writes, pushes and publishes on every task's session for that long.

load swarm_helpers

AGENTS=${ESBX_SWARM_AGENTS:-6}

setup_file() {
  swarm_setup_file
  # The project, shared from node 1; the other nodes pull it when a task
  # first needs it.
  make_tree "$SWARM_DIR/src"
  esbx_on 1 project create demo --from "$SWARM_DIR/src" >/dev/null
  esbx_on 1 project push demo >/dev/null
}

teardown_file() {
  swarm_teardown_file
}

# The agent-N sessions, each on the node whose store has it.
sessions_ready() {
  local i
  for i in $(seq 1 "$AGENTS"); do
    node_of_session "agent-$i" >/dev/null || return 1
    [ -e "$(node_dir "$(node_of_session "agent-$i")")/store/sessions/agent-$i/upper/agent-$i.txt" ] ||
      return 1
  done
}

# Running tasks of the stack, one "SLOT NODE-ID" a line.
running_tasks() {
  dk 1 service ps agents_agent --filter desired-state=running --format '{{.Name}} {{.Node}} {{.CurrentState}}' 2>/dev/null
}

@test "stack deploy: $AGENTS agents over 3 nodes, one session per task on the node it landed on" {
  local out
  out=$(ESBX_AGENTS=$AGENTS ESBX_PROJECT=demo ESBX_PUSH_EVERY=1s \
    dk 1 stack deploy --resolve-image never -c "$ESBX_SRC/contrib/compose/agent-stack.yml" agents 2>&1) || {
    echo "$out" >&2
    return 1
  }
  if ! wait_for 240 sessions_ready; then
    running_tasks >&2
    dk 1 service ps --no-trunc agents_agent >&2
    tail -n 20 "$(node_dir 1)/dockerd.log" "$(node_dir 1)/esbxd.log" >&2
    return 1
  fi
  running_tasks >&2
}

# The etcd value of KEY.
etcd_value() {
  local key
  key=$(printf '%s' "$1" | base64 -w0)
  in_svc curl -fsS -X POST "$(ETCD_URL)/v3/kv/range" -d "{\"key\":\"$key\"}" |
    jq -r '.kvs[0].value // empty' | base64 -d
}

# Every agent's session has a pushed snapshot (push-every 1s: esbxd pushes
# each one once its agent wrote its file).
all_pushed() {
  local i
  for i in $(seq 1 "$AGENTS"); do
    [ -n "$(etcd_value "esbx/projects/demo/sessions/agent-$i/snapshot")" ] || return 1
  done
}

# Every slot's session on a node other than DEAD, with its agent's file.
all_on_others() {
  local i n
  for i in $(seq 1 "$AGENTS"); do
    n=$(node_of_session "agent-$i" "$1") || return 1
    [ -e "$(node_dir "$n")/store/sessions/agent-$i/session.json" ] || return 1
  done
  [ "$(running_tasks | grep -c Running)" -eq "$AGENTS" ]
}

# Every layer the head in etcd names is in the registry (its manifest,
# tagged with its id): a head is never half written.
head_whole() {
  local id
  for id in $(etcd_head demo | jq -r '.layers[]'); do
    in_svc curl -fsS -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
      "http://$REMOTE_ADDR:$REGISTRY_PORT/v2/$(registry_prefix)/demo/manifests/$id" || return 1
  done
}

# The registry prefix the nodes were set up with (REGISTRY_URL at setup).
registry_prefix() { jq -r .registry "$(node_dir 1)/store/remote.json" | sed 's|^http://[^/]*/||'; }

# Whether node N's `esbx publish S` has a file open under the project's
# tmp/ (its staged layer).
publish_staging() {
  local pid
  for pid in $(ip netns pids "$(node_ns "$1")" 2>/dev/null); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q " publish $2 " || continue
    find "/proc/$pid/fd" -lname "$(node_dir "$1")/store/projects/demo/tmp/*" 2>/dev/null | grep -q . &&
      return 0
  done
  return 1
}

@test "a node killed mid-publish: the head is whole everywhere, its tasks come back on the others from their snapshots" {
  wait_for 120 all_pushed || { tail -n 20 "$(node_dir 1)/esbxd.log" >&2; return 1; }
  local victim=3 i n vs=() pub
  for i in $(seq 1 "$AGENTS"); do
    [ "$(node_of_session "agent-$i")" = "$victim" ] && vs+=("$i")
  done
  [ "${#vs[@]}" -gt 0 ] || skip "the scheduler put no task on node $victim"
  # Work the agents on the victim did after their last automatic push,
  # pushed by hand (deterministic: no race with esbxd's round).
  for i in "${vs[@]}"; do
    in_node "$victim" sh -c "echo 'extra $i' >\"\$($ESBX session path agent-$i)/extra-$i.txt\""
    esbx_on "$victim" session snapshot "agent-$i" --push >/dev/null
  done
  echo "${vs[@]}" >"$SWARM_DIR/victims"
  # One of them publishes while the node dies.
  pub=${vs[0]}
  esbx_on "$victim" publish "agent-$pub" -m "agent $pub from node $victim" >"$SWARM_DIR/victim-publish.log" 2>&1 &
  # The node dies once the publish has its layer staged (a file open
  # under the project's tmp/: before the registry and etcd see it), or
  # when the publish ended first.
  local t0=$SECONDS
  until publish_staging "$victim" "agent-$pub" || ! kill -0 $! 2>/dev/null; do
    [ $((SECONDS - t0)) -lt 60 ] || break
    sleep 0.01
  done
  swarm_node_kill "$victim"
  wait || true
  # The head is whole, and the surviving nodes sync to it.
  head_whole
  esbx_on 1 project pull demo
  esbx_on 2 project pull demo
  diff "$(node_dir 1)/store/projects/demo/stack" "$(node_dir 2)/store/projects/demo/stack"
  # The swarm gives the dead node's tasks to the others; each one's
  # volume resumes from the session's last pushed snapshot.
  if ! wait_for 240 all_on_others "$victim"; then
    running_tasks >&2
    tail -n 20 "$(node_dir 1)/esbxd.log" "$(node_dir 2)/esbxd.log" >&2
    return 1
  fi
  for i in "${vs[@]}"; do
    n=$(node_of_session "agent-$i" "$victim")
    grep -q "volume \`agent-$i\`: resuming from snapshot" "$(node_dir "$n")/esbxd.log"
    run in_node "$n" sh -c "cat \"\$($ESBX session path agent-$i)/extra-$i.txt\""
    assert_output "extra $i"
  done
}

@test "every task publishes from the node it runs on; every node's new sessions see the head, which is the model" {
  local victim=3 i n model=$SWARM_DIR/model got
  for i in $(seq 1 "$AGENTS"); do
    n=$(node_of_session "agent-$i" "$victim")
    esbx_on "$n" publish "agent-$i" -m "agent $i"
  done
  # The model: the tree, each agent's file, the victims' extra work.
  cp -a "$SWARM_DIR/src" "$model"
  for i in $(seq 1 "$AGENTS"); do
    echo "agent $i" >"$model/agent-$i.txt"
  done
  # shellcheck disable=SC2013 # one number per word
  for i in $(cat "$SWARM_DIR/victims" 2>/dev/null); do
    echo "extra $i" >"$model/extra-$i.txt"
  done
  local layers
  layers=$(etcd_head demo | jq '.layers | length')
  [ "$layers" -ge $((1 + AGENTS)) ] && [ "$layers" -le $((2 + AGENTS)) ]
  for n in 1 2; do
    esbx_on "$n" session create demo --name "check-$n" >/dev/null
    got=$SWARM_DIR/got-$n
    mkdir "$got"
    esbx_on "$n" export demo -o "$got.tar"
    tar -xf "$got.tar" -C "$got"
    diff -r --no-dereference "$model" "$got"
  done
}

@test "a node cut from etcd refuses publishes with one line naming etcd, and keeps its sessions" {
  local n=2 s
  s=$(for i in $(seq 1 "$AGENTS"); do [ "$(node_of_session "agent-$i" 3)" = $n ] && echo "agent-$i" && break; done)
  [ -n "$s" ]
  in_node "$n" sh -c "echo late >\"\$($ESBX session path $s)/late.txt\""
  # Only etcd's port, in the node's own namespace (gone with it).
  in_node "$n" iptables -A OUTPUT -p tcp -d "$REMOTE_ADDR" --dport "$ETCD_PORT" -j REJECT --reject-with tcp-reset
  run esbx_on "$n" publish "$s" -m late
  in_node "$n" iptables -D OUTPUT -p tcp -d "$REMOTE_ADDR" --dport "$ETCD_PORT" -j REJECT --reject-with tcp-reset
  assert_failure 1
  assert_output --partial "etcd \`$(ETCD_URL)\`"
  [ "${#lines[@]}" -eq 1 ]
  [ -e "$(node_dir "$n")/store/sessions/$s/upper/late.txt" ]
  [ "$(running_tasks | grep -c Running)" -eq "$AGENTS" ]
  # Back in reach: the same publish lands.
  esbx_on "$n" publish "$s" -m late
}

@test "soak: rounds of writes, pushes and publishes on every task (ESBX_SWARM_SOAK seconds)" {
  [ "${ESBX_SWARM_SOAK:-0}" -gt 0 ] || skip "ESBX_SWARM_SOAK is 0"
  local t0=$SECONDS round=0 i n
  while [ $((SECONDS - t0)) -lt "$ESBX_SWARM_SOAK" ]; do
    round=$((round + 1))
    for i in $(seq 1 "$AGENTS"); do
      n=$(node_of_session "agent-$i" 3)
      in_node "$n" sh -c "echo $round >\"\$($ESBX session path agent-$i)/round-$i.txt\""
      esbx_on "$n" session snapshot "agent-$i" --push >/dev/null
      esbx_on "$n" publish "agent-$i" -m "round $round of $i" >/dev/null
    done
  done
  echo "# $round rounds" >&3
  head_whole
}

@test "stack rm and the teardown leave no daemon, namespace, mount or cgroup behind" {
  dk 1 stack rm agents >/dev/null
  local dir=$SWARM_DIR id=$SWARM_ID
  swarm_teardown
  [ ! -e "$dir" ]
  run ip netns list
  refute_output --partial "esbx-sw-$id-"
  run grep -c "$dir" /proc/mounts
  assert_output 0
  run compgen -G "/sys/fs/cgroup/*/esbx-sw-$id-*"
  assert_failure
  run compgen -G "/sys/fs/cgroup/esbx-sw-$id-*"
  assert_failure
  run pgrep -f "$dir"
  assert_failure 1
}
