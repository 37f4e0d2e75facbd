# Shared helpers for the bats suites.  Each test gets its own store under a
# fresh temporary root; teardown removes every mount, holder and cgroup it
# left, pass or fail.

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load '/usr/lib/bats/bats-file/load'

ESBX_SRC=${ESBX_SRC:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
ESBX_BUILD=${ESBX_BUILD:-$ESBX_SRC/build}
# Sessions run in a user namespace by default, where the host's root can
# no longer create files in their merged view (it has no id there).  The
# suites that write into a session from the host run without one; those
# about the boundary and the holder set ESBX_USERNS=auto before `load`.
ESBX_USERNS=${ESBX_USERNS:-off}
export ESBX_USERNS
ESBX=${ESBX:-$ESBX_BUILD/cli/esbx}
ESBXD=${ESBXD:-$ESBX_BUILD/volume-plugin/esbxd}
export ESBX_SRC ESBX_BUILD ESBX ESBXD

# Run esbx and check its exit status: `esbx_ok ARGS`, `esbx_fails N ARGS`.
esbx_ok() {
  run "$ESBX" "$@"
  if [ "$status" -ne 0 ]; then
    echo "esbx $* exited $status: $output" >&2
    return 1
  fi
}

esbx_fails() {
  local want=$1
  shift
  run "$ESBX" "$@"
  if [ "$status" -ne "$want" ]; then
    echo "esbx $* exited $status, wanted $want: $output" >&2
    return 1
  fi
}

# A fresh store root for this test; once per test, so that a test may add a
# gateway (setup_gateway) to the store its setup made.
setup_store() {
  if [ "${ESBX_STORE_OF_TEST:-}" = "$BATS_TEST_TMPDIR" ] && [ -d "${ESBX_ROOT:-}" ]; then
    return 0
  fi
  ESBX_ROOT=$(mktemp -d /tmp/esbx-test.XXXXXX)
  ESBX_STORE_OF_TEST=$BATS_TEST_TMPDIR
  export ESBX_ROOT
  # ESBX_TEST_ISOLATION=gvisor: the store's sessions are gVisor sandboxes
  # (the boundary suites run so in .ci/run as well).
  if [ -n "${ESBX_TEST_ISOLATION:-}" ]; then
    [ "$ESBX_TEST_ISOLATION" != gvisor ] || need_runsc
    echo "isolation = $ESBX_TEST_ISOLATION" >"$ESBX_ROOT/defaults.conf"
  fi
}

# `need_runsc`: skip, saying why, where runsc cannot run a sandbox on this
# host (no runsc outside CI, or runsc there but refused by the host: no
# ptrace, say); under CI a missing runsc fails, hack/install-deps installs
# it.  Probed once per file; call it from setup or a test (bats cannot skip
# from setup_file).
need_runsc() {
  local out mark=$BATS_FILE_TMPDIR/runsc-probe
  if ! command -v runsc >/dev/null; then
    if [ -n "${CI:-}" ]; then
      echo "runsc is not installed: hack/install-deps installs it" >&2
      return 1
    fi
    skip "runsc is not installed (hack/install-deps installs it)"
  fi
  if [ ! -e "$mark" ]; then
    local rc=0 platform=${ESBX_RUNSC_PLATFORM:-ptrace}
    out=$(cd "$BATS_FILE_TMPDIR" && timeout 60 runsc --network=none --ignore-cgroups \
      --platform="$platform" "do" true 2>&1) || rc=$?
    if [ "$rc" = 0 ]; then
      echo ok >"$mark"
    else
      out=$(printf '%s\n' "$out" | grep . | tail -n 1)
      [ "$rc" != 124 ] || out="no sandbox within 60 s"
      echo "runsc --platform=$platform do true: ${out:-status $rc}" >"$mark.failed"
      echo failed >"$mark"
    fi
  fi
  [ "$(cat "$mark")" = ok ] || skip "runsc cannot start a sandbox on this host: $(cat "$mark.failed")"
}

# A store with project p, made from make_tree's tree in $BATS_TEST_TMPDIR/src.
setup_project() {
  setup_store
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

# setup_project and session s1 of p, its merged directory in $m.
setup_session() {
  setup_project
  make_session p s1
}

# Everything the test left: holders, mounts, cgroups, the root itself.
teardown_store() {
  [ -n "${ESBX_ROOT:-}" ] && [ -d "$ESBX_ROOT" ] || return 0
  local s pidfile
  for s in "$ESBX_ROOT"/sessions/*/; do
    [ -d "$s" ] || continue
    "$ESBX" discard "$(basename "$s")" >/dev/null 2>&1 || true
  done
  kill_session_remnants
  # Whatever discard could not take down: unmount deepest first.
  grep -F "$ESBX_ROOT" /proc/self/mountinfo | awk '{print $5}' | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$ESBX_ROOT"
  unset ESBX_ROOT
}

# The default hooks: a store of its own for every test.  docker_helpers.bash
# and gateway_helpers.bash replace them with theirs; a suite that needs more
# defines its own after `load`.
setup() { setup_store; }
teardown() { teardown_store; }

# Holders and cgroups of this store that discard left (a test killed esbx
# mid-way, or discard itself is what failed).  The store's cgroups are
# esbx/HASH.S, HASH the first 8 hex digits of sha256 of the root.
kill_session_remnants() {
  local rec pid hash d
  for rec in "$ESBX_ROOT"/sessions/*/holder.json; do
    [ -f "$rec" ] || continue
    pid=$(sed -n 's/^ *"pid": *\([0-9]*\).*/\1/p' "$rec")
    if [ -n "$pid" ] && grep -qa esbx-holder "/proc/$pid/cmdline" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  hash=$(printf %s "$ESBX_ROOT" | sha256sum | cut -c1-8)
  for d in /sys/fs/cgroup/*/esbx/"$hash".* /sys/fs/cgroup/esbx/"$hash".*; do
    [ -d "$d" ] || continue
    xargs -r kill -9 <"$d/cgroup.procs" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
  done
}

# A small source tree for `project create --from`.
make_tree() {
  local dir=$1
  mkdir -p "$dir/src" "$dir/docs"
  printf 'int main (void) { return 0; }\n' >"$dir/src/main.c"
  printf 'hello\n' >"$dir/README"
  printf 'line1\nline2\n' >"$dir/docs/guide.txt"
  ln -s README "$dir/link"
}

# The merged directory of session NAME (mounted again if it was not).
path_of() { "$ESBX" session path "$1"; }

# `as_session_root S CMD...`: CMD on the host as session S's root, i.e.
# with the host id its root has when S runs in a user namespace (host
# root has none there: creating a file in its merged view fails with
# EOVERFLOW), as is otherwise.  That id cannot enter the store's root
# (0700): start CMD in the merged view and give it relative paths.
as_session_root() {
  local s=$1 uid
  shift
  uid=$(jq -r 'if .mode == "userns" then .uid else empty end' \
    "$ESBX_ROOT/sessions/$s/userns.json" 2>/dev/null) || uid=
  if [ -n "$uid" ]; then
    setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"
  else
    "$@"
  fi
}

# Skip the test when the store's sessions are gVisor sandboxes: `skip_gvisor
# WHY` (what the tier does not have; docs/SECURITY.md, "Isolation tiers").
skip_gvisor() {
  [ "${ESBX_TEST_ISOLATION:-}" != gvisor ] || skip "not in the gVisor tier: $1"
}

# `session_put S PATH`: stdin into PATH of session S's merged view, written
# by the session's root (as_session_root) from within the view (the
# store's root is not open to that id); parents are made.
session_put() {
  local s=$1 rel=$2 dir
  dir=$(path_of "$s") || return
  # shellcheck disable=SC2016 # expanded by that sh
  (cd "$dir" && as_session_root "$s" sh -c 'mkdir -p "$(dirname "$1")" && cat >"$1"' sh "$rel")
}

# `make_session PROJECT NAME [OPTIONS]`: session NAME of PROJECT, its merged
# directory in $m.
make_session() {
  local project=$1 name=$2
  shift 2
  esbx_ok session create "$project" --name "$name" "$@" || return
  m=$(path_of "$name")
}

# `make_sessions PROJECT NAME...`: a session of PROJECT for each NAME.
make_sessions() {
  local project=$1 name
  shift
  for name in "$@"; do
    esbx_ok session create "$project" --name "$name" || return
  done
}

# The top layer (the head) of PROJECT (p) and the number of its layers.
head_of() { tail -n1 "$ESBX_ROOT/projects/${1:-p}/stack"; }
layer_count() { wc -l <"$ESBX_ROOT/projects/${1:-p}/stack"; }

# The pid in session NAME's holder record.
holder_pid() {
  sed -n 's/^ *"pid": *\([0-9]*\).*/\1/p' "$ESBX_ROOT/sessions/$1/holder.json"
}

# Gone: no such process, or a zombie nobody reaped yet.
proc_gone() {
  ! grep -q '^State:[[:space:]]*[^Z]' "/proc/$1/status" 2>/dev/null
}

# `wait_gone PID [SECONDS]`: gone within SECONDS (5), or fail.
wait_gone() {
  for _ in $(seq $((${2:-5} * 10))); do proc_gone "$1" && return 0; sleep 0.1; done
  proc_gone "$1"
}

# `wait_log LOG PATTERN [SECONDS]`: wait up to SECONDS (10) for a line
# matching the extended regex PATTERN in LOG; a daemon writes its log line
# after the change it reports, so a test that saw the change waits for it.
wait_log() {
  local i
  for i in $(seq 1 $((${3:-10} * 10))); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no line matching '$2' in $1" >&2
  return 1
}

# A JSON field with python3 (available wherever bats runs here):
# `json_field 'Volume.Status.changes' <<<"$json"`.
json_field() {
  python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k)
print(json.dumps(v) if isinstance(v, (dict, list)) else ("" if v is None else v))
' "$1"
}

# The "name" of every object of a JSON list, space-separated:
# `json_names <<<"$json"` (matching on names, not on the whole output, which
# holds random temp paths).
json_names() {
  python3 -c 'import json, sys; print(" ".join(o["name"] for o in json.load(sys.stdin)))'
}

# `esbxd_log_if_failed LOG [LINES]`: in a teardown, the last LINES (30) of
# esbxd's LOG when the test failed.
esbxd_log_if_failed() {
  if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -f "${1:-}" ]; then
    echo "--- last lines of the esbxd log"
    tail -n "${2:-30}" "$1"
  fi
}

# Stop the esbxd whose pid is $ESBXD_PID (if any): TERM, then KILL after
# 5 s; clears ESBXD_PID.
esbxd_down() {
  [ -n "${ESBXD_PID:-}" ] || return 0
  kill -TERM "$ESBXD_PID" 2>/dev/null || true
  local i=0
  while kill -0 "$ESBXD_PID" 2>/dev/null && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -KILL "$ESBXD_PID" 2>/dev/null || true
  ESBXD_PID=
}

# A TCP port for a listener of the test: below the kernel's ephemeral
# range (32768 up), where no outgoing connection is given one, and not
# listened on now.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
}

# Whether the host's nftables name link $1: the elements of the egress
# sessions' shared table (or a table of its own, made by an older esbx).
nft_names_link() { nft list ruleset 2>/dev/null | grep -qF "\"$1\""; }
