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
  if ! wait_for 90 sessions_ready; then
    running_tasks >&2
    dk 1 service ps --no-trunc agents_agent >&2
    tail -n 20 "$(node_dir 1)/dockerd.log" "$(node_dir 1)/esbxd.log" >&2
    return 1
  fi
  running_tasks >&2
}
