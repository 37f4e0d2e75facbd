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
