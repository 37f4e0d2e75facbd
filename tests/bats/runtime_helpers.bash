# Helpers for the esbx-runtime suites (40-runtime, 41-runtime-docker).  Load
# after helpers.bash or docker_helpers.bash: this file loads neither, so that
# the hooks those define stay as the suite chose them.

RT=${ESBX_RUNTIME:-$ESBX_BUILD/shim/esbx-runtime}

# Belt and braces for teardown: end every holder of the test's store and
# remove its cgroup, whatever discard manages.
stop_holders() {
  local f pid cg d i
  for f in "${ESBX_ROOT:-/nonexistent}"/sessions/*/holder.json; do
    [ -f "$f" ] || continue
    pid=$(jq -r '.pid // empty' "$f" 2>/dev/null) || continue
    cg=$(jq -r '.cgroup // empty' "$f" 2>/dev/null) || true
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = esbx-holder ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
    fi
    [ -n "$cg" ] || continue
    for d in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  return 0
}

# The OCI runtime NAME (runc or crun) as a test calls it: its path; for crun
# on a host whose cgroups are hybrid with a controller on the cgroup2 side
# (crun 1.8 then refuses every container: "cgroups in hybrid mode not
# supported"), a wrapper named crun that runs the real crun in a mount
# namespace of its own without /sys/fs/cgroup/unified, where crun sees
# cgroup v1 only.  Nothing changes outside that namespace.
oci_runtime() {
  local name=$1 path dir
  path=$(command -v "$name") || return 1
  if [ "$name" = crun ] && crun_refuses_hybrid; then
    dir=$BATS_FILE_TMPDIR/oci
    mkdir -p "$dir"
    cat >"$dir/crun" <<EOF
#!/bin/sh
# crun without the cgroup2 side of this hybrid host (runtime_helpers.bash).
exec unshare --mount --propagation slave sh -c 'umount /sys/fs/cgroup/unified && exec "\$0" "\$@"' "$path" "\$@"
EOF
    chmod +x "$dir/crun"
    path=$dir/crun
  fi
  echo "$path"
}

crun_refuses_hybrid() {
  [ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] &&
    [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] &&
    [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]
}
