# shellcheck shell=bash
# What the hack/bench scripts share: timing a command, medians, ratios, the
# figures they print and the generated source tree.  Not a benchmark (not
# executable: hack/bench/all runs only the executable files here); each
# script sources it:
#
#   # shellcheck source=lib.sh
#   . "$(dirname "$0")/lib.sh"
#
# A script's settings are plain variables, read at each call:
#
#   bench         its name in messages ("bench/NAME: failed: CMD")
#   bench_tmp     a directory of the script's own: time_cmd leaves the last
#                 timed command's stderr in bench_tmp/err
#   bench_unit    ns (the default) or us: the unit time_cmd records in and
#                 ms and median_ms read.  ns reads the clock with date(1),
#                 us with $EPOCHREALTIME (no fork).
#   bench_sync    1 (the default): time_cmd runs sync(1) first, so that the
#                 writeback of earlier work is not timed; 0: it does not
#   bench_stdout  where a timed command's stdout goes (/dev/null)
#   bench_any_status  1: a timed command may fail (its time counts); else
#                 a failure prints its stderr and time_cmd fails
#   ratio_format  printf format of ratio's quotient (%.2f)
#   ms_decimals   decimals of ms (2)

# The scripts write into sessions from the host, as root, as the tools
# they are compared with do; a session in a user namespace of its own does
# not let host root create files (docs/SANDBOXES.md), so their sessions are
# the root tier unless ESBX_USERNS says otherwise (hack/bench/isolation
# measures the tiers).
export ESBX_USERNS=${ESBX_USERNS:-off}

now_ns() { date +%s%N; }

# `time_cmd VAR CMD...`: run CMD once, stdin from /dev/null, and append its
# wall time to the array VAR.
time_cmd() {
  local var=$1 a b
  shift
  [ "${bench_sync:-1}" = 0 ] || sync
  if [ "${bench_unit:-ns}" = us ]; then a=${EPOCHREALTIME/./}; else a=$(now_ns); fi
  # shellcheck disable=SC2154 # bench_tmp is the sourcing script's
  if ! "$@" >"${bench_stdout:-/dev/null}" 2>"$bench_tmp/err" </dev/null && [ "${bench_any_status:-0}" != 1 ]; then
    echo "bench/${bench:-?}: failed: $*" >&2
    cat "$bench_tmp/err" >&2
    return 1
  fi
  if [ "${bench_unit:-ns}" = us ]; then b=${EPOCHREALTIME/./}; else b=$(now_ns); fi
  eval "$var+=($((b - a)))"
}

# The median of the numbers on stdin, one a line: the middle one, or the
# mean of the two middle ones.
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# The lower middle one: always one of the numbers (an integer for integers).
median_low() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# The median of stdin's figures (in bench_unit) in ms with two decimals;
# "nan" when there are none.
median_ms() {
  local div=1e6
  [ "${bench_unit:-ns}" = ns ] || div=1e3
  sort -n | awk -v div="$div" '{ v[NR] = $1 } END {
    if (NR == 0) { print "nan"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f\n", m / div }'
}

sum() { awk '{s += $1} END {print s + 0}'; }

# `med ARRAY`, `med_ms ARRAY`, `tot ARRAY`: median, median_ms and sum of an
# array's elements.
med() { local -n arr=$1; printf '%s\n' "${arr[@]}" | median; }
med_ms() {
  local -n arr=$1
  if [ ${#arr[@]} -eq 0 ]; then echo nan; else printf '%s\n' "${arr[@]}" | median_ms; fi
}
tot() { local -n arr=$1; printf '%s\n' "${arr[@]}" | sum; }

# `ratio A B`: A/B as ratio_format (0 when B is not positive).
ratio() { awk -v a="$1" -v b="$2" -v f="${ratio_format:-%.2f}" 'BEGIN {printf f, (b > 0 ? a / b : 0)}'; }

# `ms T`: T (in bench_unit) as "%9.Nf ms", N = ms_decimals.
ms() {
  local div=1e6
  [ "${bench_unit:-ns}" = ns ] || div=1e3
  awk -v t="$1" -v div="$div" -v f="%9.${ms_decimals:-2}f ms" 'BEGIN {printf f, t / div}'
}

# `make_tree DIR N`: N files shaped like a source repository, the same
# every run: 1/20 of the files per directory, sizes log-normal around 4 KiB
# with a long tail (a few files of ~1 MiB).
make_tree() {
  python3 - "$1" "$2" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
ndirs = max(1, n // 20)
for d in range(ndirs):
    os.makedirs(os.path.join(root, f"pkg{d // 50}", f"mod{d}"), exist_ok=True)
line = b"    value = compute(value, index) + offset;  /* generated */\n"
for i in range(n):
    size = min(int(rng.lognormvariate(8.3, 1.2)), 2 << 20)
    d = i % ndirs
    body = (line * (size // len(line) + 1))[:size]
    with open(os.path.join(root, f"pkg{d // 50}", f"mod{d}", f"f{i}.c"), "wb") as f:
        f.write(b"/* %d */\n" % i + body)
PY
}

# ---- a directory of a script's own, and leaving nothing behind ----------
#
#   dir=$(bench_dir NAME)      /var/tmp/esbx-bench-NAME.XXXXXX, owned by
#                              this shell (its pid and start time in
#                              DIR/owner); the directories of earlier runs
#                              of NAME whose owner is gone (killed, with
#                              no trap run) are torn down first
#   bench_teardown DIR         stop the processes of the store DIR/store
#                              that are left (its cgroups), unmount every
#                              mount under DIR, deepest first, until none
#                              is left, and remove DIR
#   bench_trap CLEANUP         run the script's function CLEANUP once,
#                              whatever ends the script (its end, an error,
#                              INT, TERM, HUP), with those signals ignored
#                              meanwhile and in what it runs (a second
#                              Ctrl-C does not cut it short), then exit

# `start_time PID`: field 22 of /proc/PID/stat (clock ticks since boot).
start_time() { awk '{sub(/^.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }

# The mount points under DIR, deepest (longest) first.
mounts_under() {
  awk -v d="$1/" 'index($5, d) == 1 {print length($5), $5}' /proc/self/mountinfo | sort -rn | cut -d' ' -f2-
}

bench_teardown() {
  local dir=$1 prefix cg
  [ -d "$dir" ] || return 0
  # Processes of the store's sessions that are still there: their cgroups
  # (shim/lib/cgroup.c: esbx/<8 hex digits of SHA-256 of the root>.<session>).
  prefix=$(printf '%s' "$dir/store" | sha256sum | cut -c1-8)
  for cg in /sys/fs/cgroup/esbx/"$prefix".* /sys/fs/cgroup/*/esbx/"$prefix".*; do
    [ -d "$cg" ] || continue
    if [ -e "$cg/cgroup.kill" ]; then
      echo 1 >"$cg/cgroup.kill" 2>/dev/null || true
    else
      xargs -r kill -KILL <"$cg/cgroup.procs" 2>/dev/null || true
    fi
  done
  for cg in /sys/fs/cgroup/esbx/"$prefix".* /sys/fs/cgroup/*/esbx/"$prefix".*; do
    [ -d "$cg" ] || continue
    for _ in $(seq 50); do
      [ -s "$cg/cgroup.procs" ] || break
      sleep 0.1
    done
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  for _ in 1 2 3 4 5; do
    [ -n "$(mounts_under "$dir")" ] || break
    # umount2(MNT_DETACH) directly: umount(8) reads the whole mount
    # table for each of thousands of targets.
    mounts_under "$dir" | python3 -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for line in sys.stdin:
    libc.umount2(line.rstrip("\n").encode(), 2)' 2>/dev/null ||
      mounts_under "$dir" | tr '\n' '\0' | xargs -0 -r umount -l 2>/dev/null || true
  done
  if [ -n "$(mounts_under "$dir")" ]; then
    echo "bench/${bench:-?}: mounts left under $dir:" >&2
    mounts_under "$dir" | head -5 >&2
    return 1
  fi
  # A discard's remover (a process of its own, detached) may still be
  # emptying a directory of store/tmp beside us.
  for _ in $(seq 50); do
    rm -rf "$dir" 2>/dev/null && return 0
    sleep 0.1
  done
  rm -rf "$dir"
}

bench_dir() {
  local name=$1 old pid start dir
  for old in /var/tmp/esbx-bench-"$name".*; do
    [ -f "$old/owner" ] || continue
    read -r pid start <"$old/owner" || continue
    [ -n "$pid" ] && [ "$(start_time "$pid")" = "$start" ] && continue
    echo "bench/$name: removing $old, left by an earlier run" >&2
    bench_teardown "$old" || true
  done
  dir=$(mktemp -d "/var/tmp/esbx-bench-$name.XXXXXX")
  echo "$$ $(start_time $$)" >"$dir/owner"
  echo "$dir"
}

bench_trap() {
  bench_cleanup=$1
  trap bench_exit EXIT
  trap 'bench_signal 130' INT
  trap 'bench_signal 143' TERM
  trap 'bench_signal 129' HUP
}

# A signal while the cleanup runs changes nothing; else the first one
# ignores the others and exits, which runs bench_exit.
bench_signal() {
  [ -z "${bench_exiting:-}" ] || return 0
  bench_exiting=1
  trap '' INT TERM HUP
  exit "$1"
}

bench_exit() {
  bench_status=$? bench_exiting=1
  trap '' INT TERM HUP
  trap - EXIT
  set +e
  "$bench_cleanup"
  exit "$bench_status"
}
