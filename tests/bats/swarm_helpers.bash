# Helpers of the Swarm-mode suite (88-swarm.bats): three Docker daemons
# joined into one swarm, each with esbxd as its `esbx` volume plugin, all
# pointed at one registry and one etcd.  The registry and etcd run in a
# network namespace of their own with a bridge (remote_helpers.bash,
# setup_remote_netns: 198.18.81.1/24, the benchmarking range); node N
# (1..3) gets
#
#   - network namespace esbx-sw-ID-nN, its eth0 (198.18.81.(20+N)) the
#     other end of a veth pair on that bridge: the swarm's addresses (2377,
#     7946, 4789) and the services are reached only through it;
#   - a mount namespace of its own, kept in $SWARM_DIR/ns/nN (a private
#     bind mount), with tmpfs on /run/docker/plugins and /run/containerd:
#     its esbxd's socket is seen by its dockerd only, and the containerd
#     shims' sockets of the three daemons and of the host's stay apart;
#   - a dockerd with its own --data-root, --exec-root, --pidfile, -H unix
#     socket and --config-file under $SWARM_DIR/nN, --cgroup-parent
#     /esbx-sw-ID-nN, no bridge and no iptables rules (--bridge none
#     --iptables=false: nothing it does reaches the host's networking; the
#     tasks attach to the stack's overlay network inside the namespaces),
#     and the test image imported into it (hack/docker-test-image);
#   - an esbxd serving store $SWARM_DIR/nN/store on
#     /run/docker/plugins/esbx.sock of its namespace, metrics on the
#     namespace's own 127.0.0.1:9595.
#
# The host's dockerd (/run/docker.sock) is never used.  swarm_teardown
# kills every process of a node (its namespace's, its cgroups'), unmounts
# its namespace and deletes it with its veth, pass or fail: teardown_file
# calls it, and bats runs teardown_file from its EXIT trap whenever the
# file's process ends, a failed setup_file or an interrupt included.  A
# run killed outright (SIGKILL) is cleaned by the next one
# (swarm_clean_stale: its directory names the process that owned it).
# shellcheck shell=bash

load remote_helpers

# The Docker client of Debian's docker.io: the daemons are 20.10 too.
if [ -x /usr/bin/docker ]; then
  SWARM_DOCKER=${ESBX_SWARM_DOCKER:-/usr/bin/docker}
else
  SWARM_DOCKER=${ESBX_SWARM_DOCKER:-$(command -v docker)}
fi
SWARM_NODES=3

# setup_file: the services, then three nodes in one swarm.
swarm_setup_file() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed"
  command -v etcd >/dev/null || skip "etcd is not installed"
  command -v dockerd >/dev/null || skip "dockerd is not installed"
  [ -n "$SWARM_DOCKER" ] || skip "the docker client is not installed"
  swarm_clean_stale
  SWARM_ID=$$
  SWARM_DIR=$(mktemp -d /tmp/esbx-sw.XXXXXX)
  export SWARM_ID SWARM_DIR SWARM_DOCKER
  echo "$SWARM_ID" >"$SWARM_DIR/owner"
  setup_remote_netns
  echo "$REMOTE_NETNS" >"$SWARM_DIR/svc-netns"
  echo "$REMOTE_DIR" >"$SWARM_DIR/remote-dir"
  mkdir -p "$SWARM_DIR/ns"
  mount --bind "$SWARM_DIR/ns" "$SWARM_DIR/ns"
  mount --make-private "$SWARM_DIR/ns"
  local n
  for n in $(seq 1 "$SWARM_NODES"); do
    swarm_node_up "$n"
  done
  swarm_form
}

swarm_teardown_file() {
  swarm_teardown
  teardown_remote_netns
}

node_ns() { echo "esbx-sw-$SWARM_ID-n$1"; }
node_addr() { echo "$REMOTE_SUBNET.$((20 + $1))"; }
node_dir() { echo "$SWARM_DIR/n$1"; }

# `in_node N CMD...`: CMD in node N's network and mount namespaces, with
# ESBX_ROOT its store and DOCKER_HOST its dockerd.
in_node() {
  local n=$1
  shift
  ESBX_ROOT=$(node_dir "$n")/store DOCKER_HOST="unix://$(node_dir "$n")/docker.sock" \
    nsenter --mount="$SWARM_DIR/ns/n$n" --net="/run/netns/$(node_ns "$n")" "$@"
}

# `dk N ARGS`: docker ARGS against node N's dockerd.
dk() {
  local n=$1
  shift
  "$SWARM_DOCKER" -H "unix://$(node_dir "$n")/docker.sock" "$@"
}

# `esbx_on N ARGS`: esbx ARGS on node N.
esbx_on() {
  local n=$1
  shift
  in_node "$n" "$ESBX" "$@"
}

swarm_node_up() {
  local n=$1 ns dir
  ns=$(node_ns "$n")
  dir=$(node_dir "$n")
  mkdir -p "$dir/data" "$dir/exec" "$dir/store"
  echo "$n" >>"$SWARM_DIR/nodes"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$REMOTE_NETNS" link add "sw$n" type veth peer name eth0 netns "$ns"
  ip -n "$REMOTE_NETNS" link set "sw$n" master br0 up
  ip -n "$ns" addr add "$(node_addr "$n")/24" dev eth0
  ip -n "$ns" link set eth0 up
  touch "$SWARM_DIR/ns/n$n"
  unshare --mount="$SWARM_DIR/ns/n$n" --propagation private true
  nsenter --mount="$SWARM_DIR/ns/n$n" sh -c \
    'mkdir -p /run/docker/plugins /run/containerd &&
     mount -t tmpfs -o mode=0755 esbx-sw /run/docker/plugins &&
     mount -t tmpfs -o mode=0711 esbx-sw /run/containerd'
  ESBX_ROOT=$dir/store "$ESBX" remote set --registry "$(REGISTRY_URL)" --etcd "$(ETCD_URL)" >/dev/null
  swarm_esbxd_up "$n"
  echo '{}' >"$dir/daemon.json"
  in_node "$n" setsid dockerd --config-file "$dir/daemon.json" --data-root "$dir/data" \
    --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" -H "unix://$dir/docker.sock" \
    --cgroup-parent "/esbx-sw-$SWARM_ID-n$n" --bridge none --iptables=false \
    --userland-proxy=false </dev/null >>"$dir/dockerd.log" 2>&1 &
  # A loaded host starts a dockerd in seconds, sometimes tens of them.
  wait_for 120 dk "$n" info >/dev/null 2>&1 || { tail -n 30 "$dir/dockerd.log" >&2; return 1; }
  DOCKER_HOST="unix://$dir/docker.sock" PATH="$(dirname "$SWARM_DOCKER"):$PATH" \
    "$ESBX_SRC/hack/docker-test-image" "$ESBX_TEST_IMAGE" >/dev/null
  # dockerd lists a plugin of the socket directory among its volume
  # drivers (what the swarm's scheduler places by: "missing plugin") only
  # once something has asked for it: ask before the node joins.
  dk "$n" volume create -d esbx -o project=esbx-probe esbx-probe >/dev/null 2>&1 || true
  dk "$n" info -f '{{.Plugins.Volume}}' | grep -qw esbx
}

ESBX_TEST_IMAGE=${ESBX_TEST_IMAGE:-esbx-test:latest}

# esbxd of node N in its namespaces; its log in nN/esbxd.log.
swarm_esbxd_up() {
  local n=$1 dir pid t0
  dir=$(node_dir "$n")
  in_node "$n" setsid "$ESBXD" --root "$dir/store" --plugin-socket /run/docker/plugins/esbx.sock \
    --gateway-socket none --metrics 127.0.0.1:9595 </dev/null >>"$dir/esbxd.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/esbxd.pid"
  t0=$SECONDS
  while [ $((SECONDS - t0)) -lt 60 ]; do
    in_node "$n" curl -fsS -o /dev/null http://127.0.0.1:9595/healthz 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 30 "$dir/esbxd.log" >&2
  return 1
}

# Node 1 the manager, 2 and 3 workers; each labelled esbx.node=nN.  The
# dispatcher's heartbeat is 1 s, so a node that stops answering is down
# (and its tasks are given to the others) within a few seconds.
swarm_form() {
  local n token id
  dk 1 swarm init --advertise-addr "$(node_addr 1)" --listen-addr "$(node_addr 1):2377" \
    --dispatcher-heartbeat 1s >/dev/null
  token=$(dk 1 swarm join-token -q worker)
  for n in $(seq 2 "$SWARM_NODES"); do
    dk "$n" swarm join --advertise-addr "$(node_addr "$n")" --listen-addr "$(node_addr "$n"):2377" \
      --token "$token" "$(node_addr 1):2377" >/dev/null
  done
  for n in $(seq 1 "$SWARM_NODES"); do
    id=$(dk "$n" info -f '{{.Swarm.NodeID}}')
    echo "$id" >"$(node_dir "$n")/node-id"
    dk 1 node update --label-add "esbx.node=n$n" "$id" >/dev/null
  done
}

# Every process of node N killed with SIGKILL: its namespace's (dockerd,
# containerd, esbxd) and those in its cgroups (the tasks' containers, in
# namespaces of their own).  The node is gone as a machine that lost power
# would be; its namespaces and mounts stay until swarm_teardown.
swarm_node_kill() {
  local n=$1 ns pids t0=$SECONDS
  ns=$(node_ns "$n")
  while [ $((SECONDS - t0)) -lt 30 ]; do
    pids=$(ip netns pids "$ns" 2>/dev/null; node_cgroup_pids "$n")
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086 # one pid per word
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
}

# The pids in node N's cgroups (every v1 hierarchy and the v2 one).
node_cgroup_pids() {
  local d
  for d in /sys/fs/cgroup/*/"esbx-sw-$SWARM_ID-n$1" /sys/fs/cgroup/"esbx-sw-$SWARM_ID-n$1"; do
    [ -d "$d" ] || continue
    find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

node_cgroups_remove() {
  local d
  for d in /sys/fs/cgroup/*/"esbx-sw-$SWARM_ID-n$1" /sys/fs/cgroup/"esbx-sw-$SWARM_ID-n$1"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# Everything of every node, pass or fail: processes, store mounts (inside
# the node's mount namespace, which goes with its file), cgroups,
# namespaces, veths (with the namespace), the directory.  Idempotent.
swarm_teardown() {
  local n dir
  [ -n "${SWARM_DIR:-}" ] && [ -d "$SWARM_DIR" ] || return 0
  if [ -f "$SWARM_DIR/nodes" ]; then
    while read -r n; do
      swarm_node_kill "$n"
    done <"$SWARM_DIR/nodes"
    while read -r n; do
      dir=$(node_dir "$n")
      node_cgroups_remove "$n"
      # The stores' session cgroups and holders (esbx's own), then the
      # namespace file: its mounts (docker's, the sessions') go with it.
      [ ! -d "$dir/store" ] || ESBX_ROOT=$dir/store kill_session_remnants 2>/dev/null || true
      umount "$SWARM_DIR/ns/n$n" 2>/dev/null || true
      ip netns del "$(node_ns "$n")" 2>/dev/null || true
    done <"$SWARM_DIR/nodes"
  fi
  umount "$SWARM_DIR/ns" 2>/dev/null || true
  rm -rf "$SWARM_DIR"
}

# The directories (and so nodes) of runs whose process is gone: torn down
# as theirs would have been, with their services' namespace.
swarm_clean_stale() {
  local d owner svc rdir
  for d in /tmp/esbx-sw.*; do
    [ -f "$d/owner" ] || continue
    owner=$(cat "$d/owner")
    ! kill -0 "$owner" 2>/dev/null || continue
    svc=$(cat "$d/svc-netns" 2>/dev/null || true)
    rdir=$(cat "$d/remote-dir" 2>/dev/null || true)
    (SWARM_DIR=$d SWARM_ID=$owner swarm_teardown)
    [ -z "$svc" ] || kill_netns "$svc"
    [[ "$rdir" != /tmp/esbx-remote.* ]] || rm -rf "$rdir"
  done
}

# `wait_for SECONDS CMD...`: CMD until it succeeds, at most SECONDS.
wait_for() {
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || return 1
    sleep 0.5
  done
}

# The node (1..3, not DEAD) whose store has session S, or nothing:
# `node_of_session S [DEAD]`.
node_of_session() {
  local n
  for n in $(seq 1 "$SWARM_NODES"); do
    [ "$n" != "${2:-}" ] || continue
    [ -e "$(node_dir "$n")/store/sessions/$1/session.json" ] && echo "$n" && return 0
  done
  return 1
}
