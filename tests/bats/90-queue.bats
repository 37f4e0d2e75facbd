#!/usr/bin/env bats
# The merge queue of a project in `checks` mode: publish files a request,
# the queue rebases it onto the head (or onto the requests ahead of it),
# runs the checks in a throwaway session of the merged tree and lands
# exactly that tree; a failed or hung check rejects the request with its
# log and the session keeps its work; esbxd killed with a check running
# loses nothing and lands nothing twice.

load gateway_helpers
bats_require_minimum_version 1.5.0

# The small C project every test checks: `make test` builds calc and
# checks 2 + 3.
make_calc() {
  mkdir -p "$BATS_TEST_TMPDIR/src"
  cat >"$BATS_TEST_TMPDIR/src/calc.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
int main (int argc, char **argv) { (void)argc; printf ("%d\n", atoi (argv[1]) + atoi (argv[2])); return 0; }
EOF
  printf 'test: calc\n\t./calc 2 3 | grep -qx 5\ncalc: calc.c\n\tcc -o calc calc.c\n' \
    >"$BATS_TEST_TMPDIR/src/Makefile"
}

# The check prints the digest of the tree it was given before it builds
# anything, so that a test can compare it with the landed layer's.
TREE_DIGEST='find . -type f | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -c1-64'

setup() {
  setup_store
  make_calc
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}
teardown() { teardown_gateway; }

# `wait_for SECONDS CMD...`: CMD succeeds within SECONDS, or fail.
wait_for() {
  local limit=$(($1 * 10)) i=0
  shift
  until "$@"; do
    i=$((i + 1))
    [ $i -lt $limit ] || { echo "timed out waiting for: $*" >&2; return 1; }
    sleep 0.1
  done
}

request_field() { "$ESBX" --json queue show "$1" | json_field "$2"; }
state_is() { [ "$(request_field "$1" state)" = "$2" ]; }
final() { case $(request_field "$1" state) in landed | rejected | cancelled) return 0 ;; esac; return 1; }

# The digest TREE_DIGEST prints for the tree of p at LAYER.
# `layer_digest LAYER [PROJECT [DIGEST]]`
layer_digest() {
  local d=$BATS_TEST_TMPDIR/export-$1
  mkdir -p "$d"
  "$ESBX" export "${2:-p}@$1" -o "$d.tar"
  tar -xf "$d.tar" -C "$d"
  (cd "$d" && sh -c "${3:-$TREE_DIGEST}")
}

@test "project gate: set, print, usage errors change nothing" {
  run -0 "$ESBX" --json project gate p
  assert_equal "$(json_field mode <<<"$output")" auto
  esbx_ok project gate p --mode checks --check 'make test' --check-timeout 90s
  run -0 "$ESBX" --json project gate p
  assert_equal "$(json_field mode <<<"$output")" checks
  assert_equal "$(json_field checks.0 <<<"$output")" "make test"
  assert_equal "$(json_field check_timeout <<<"$output")" 90
  esbx_fails 2 project gate p --mode sometimes
  assert_output --partial "sometimes"
  esbx_fails 2 project gate p --mode checks
  assert_output --partial "--check"
  esbx_fails 2 project gate p --mode checks --check 'make test' --check-timeout never
  esbx_fails 1 project gate nosuch --mode auto
  run -0 "$ESBX" --json project gate p
  assert_equal "$(json_field check_timeout <<<"$output")" 90
  esbx_ok project gate p --mode auto
  run -0 "$ESBX" --json project gate p
  assert_equal "$(json_field mode <<<"$output")" auto
}

@test "auto stays the default: publish lands at once" {
  make_session p s1
  echo x >"$m/x.txt"
  esbx_ok publish s1
  assert_equal "$(layer_count)" 2
}

@test "three publish at once: the broken one is rejected with its log, two land, each landed tree is the one checked" {
  esbx_ok project gate p --mode checks --check "$TREE_DIGEST | sed 's/^/tree /'" --check 'make test'
  make_sessions p a b c
  echo a >"$(path_of a)/a.txt"
  echo b >"$(path_of b)/b.txt"
  sed -i 's/argv\[1\]) + atoi/argv[1]) - atoi/' "$(path_of c)/calc.c"
  local pa pb pc
  "$ESBX" publish a --wait -m "add a" >"$BATS_TEST_TMPDIR/a.out" 2>&1 &
  pa=$!
  "$ESBX" publish b --wait -m "add b" >"$BATS_TEST_TMPDIR/b.out" 2>&1 &
  pb=$!
  "$ESBX" publish c --wait -m "break calc" >"$BATS_TEST_TMPDIR/c.out" 2>&1 &
  pc=$!
  wait "$pa" || { cat "$BATS_TEST_TMPDIR/a.out"; false; }
  wait "$pb" || { cat "$BATS_TEST_TMPDIR/b.out"; false; }
  local rc=0
  wait "$pc" || rc=$?
  assert_equal "$rc" 1
  run cat "$BATS_TEST_TMPDIR/c.out"
  assert_output --partial "rejected"
  assert_output --partial "make test"
  # Two layers landed, each one request's, each tree the one its checks saw.
  assert_equal "$(layer_count)" 3
  local ids id layer log
  ids=$("$ESBX" --json queue list --project p --all | python3 -c 'import json,sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))')
  local landed=0
  for id in $ids; do
    if state_is "$id" landed; then
      landed=$((landed + 1))
      layer=$(request_field "$id" layer)
      grep -qx "$layer" "$ESBX_ROOT/projects/p/stack"
      log=$("$ESBX" queue show "$id" --log)
      grep -qx "tree $(layer_digest "$layer")" <<<"$log"
      assert_equal "$(json_field gate.request <<<"$(cat "$ESBX_ROOT/projects/p/layers/$layer/record.json")")" "$id"
    else
      state_is "$id" rejected
      run -0 "$ESBX" queue show "$id" --log
      assert_output --partial "make test"
    fi
  done
  assert_equal "$landed" 2
  # The rejected session keeps its work; the landed tree does not have it.
  run -0 "$ESBX" diff c
  assert_output --partial "/calc.c"
  run -0 "$ESBX" show p:/calc.c
  assert_output --partial "argv[1]) + atoi"
  # No throwaway session is left.
  run -0 "$ESBX" session list
  refute_output --partial ".check"
  refute_output --partial ".merge"
}

@test "publish without --wait is queued (exit 5), the queue runs later, later requests test on top of earlier ones" {
  esbx_ok project gate p --mode checks --check 'make test' --parallel 2
  make_sessions p a b c d
  local s
  for s in a b c d; do
    echo "$s" >"$(path_of $s)/$s.txt"
    run -5 "$ESBX" publish $s
    assert_output --partial "queued"
  done
  assert_equal "$(layer_count)" 1
  run -0 "$ESBX" queue list --project p
  assert_output --partial "queued"
  esbx_ok queue run p
  assert_equal "$(layer_count)" 5
  # Nothing conflicted: one check run per request, no more.
  local runs
  runs=$("$ESBX" --json queue list --project p --all | python3 -c 'import json,sys; print(sum(r["runs"] for r in json.load(sys.stdin)))')
  assert_equal "$runs" 4
  for s in a b c d; do
    run -0 "$ESBX" show p:/$s.txt
    assert_output "$s"
  done
  # Landed in the order filed.
  run -0 "$ESBX" --json project log p
  assert_equal "$(json_field 0.session <<<"$output")" d
}

@test "a request is rebased: another session's change to the same file merges, the merge is what lands" {
  esbx_ok project gate p --mode checks --check 'make test'
  printf 'one\ntwo\nthree\nfour\nfive\n' >"$BATS_TEST_TMPDIR/notes"
  make_sessions p a b
  cp "$BATS_TEST_TMPDIR/notes" "$(path_of a)/notes.txt"
  esbx_ok publish a --wait
  esbx_ok rebase b
  sed -i 's/^one$/ONE/' "$(path_of b)/notes.txt"
  make_session p c
  sed -i 's/^five$/FIVE/' "$(path_of c)/notes.txt"
  esbx_ok publish b --wait
  esbx_ok publish c --wait
  run -0 "$ESBX" show p:/notes.txt
  assert_line --index 0 ONE
  assert_line --index 4 FIVE
}

@test "a check that hangs is killed at its timeout; nothing of it stays" {
  esbx_ok project gate p --mode checks --check 'sleep 6111' --check-timeout 2s
  make_session p s1
  echo x >"$m/x.txt"
  local t0=$SECONDS
  run -1 "$ESBX" publish s1 --wait
  assert_output --partial "timed out"
  [ $((SECONDS - t0)) -lt 60 ]
  assert_equal "$(layer_count)" 1
  run -0 "$ESBX" session list
  refute_output --partial ".check"
  run -0 "$ESBX" diff s1
  assert_output --partial "/x.txt"
  # No sleep of the check survives.
  run ! pgrep -f 'sleep 6111'
}

@test "an empty publish files nothing; a second request of a session waiting is refused" {
  esbx_ok project gate p --mode checks --check true
  make_session p s1
  run -0 "$ESBX" publish s1
  echo x >"$m/x.txt"
  run -5 "$ESBX" publish s1
  run -1 "$ESBX" publish s1
  assert_output --partial "already has request"
  esbx_ok queue run p
  assert_equal "$(layer_count)" 2
}

@test "cancel withdraws a request; publish --discard ends the session once its request lands" {
  esbx_ok project gate p --mode checks --check true
  make_sessions p a b
  echo a >"$(path_of a)/a.txt"
  echo b >"$(path_of b)/b.txt"
  run -5 "$ESBX" --json publish a
  local ida
  ida=$(json_field request <<<"$output")
  run -5 "$ESBX" publish b --discard
  esbx_ok queue cancel "$ida"
  state_is "$ida" cancelled
  esbx_ok queue run p
  assert_equal "$(layer_count)" 2
  run -0 "$ESBX" session list
  refute_output --partial $'\tb\t'
  [ ! -d "$ESBX_ROOT/sessions/b" ]
  [ -d "$ESBX_ROOT/sessions/a" ]
  esbx_fails 1 queue cancel "$ida"
  esbx_fails 1 queue show r999999
}

@test "esbxd runs the queue; killed with a check running, restarted: nothing lost, nothing landed twice" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  GW_DIR=$(mktemp -d /tmp/esbx-gw.XXXXXX)
  GW_SOCK=$GW_DIR/gateway.sock
  GW_LOG=$GW_DIR/esbxd.log
  METRICS_PORT=$(free_port)
  esbx_ok project gate p --mode checks --check 'test -e /workspace/slow && sleep 3; make test' --parallel 1
  make_sessions p a b
  echo a >"$(path_of a)/slow"
  echo b >"$(path_of b)/b.txt"
  local ida idb
  run -5 "$ESBX" --json publish a
  ida=$(json_field request <<<"$output")
  run -5 "$ESBX" --json publish b
  idb=$(json_field request <<<"$output")
  start_gateway
  wait_for 30 state_is "$ida" testing
  wait_for 30 test -s "$ESBX_ROOT/projects/p/queue/$ida/check.log"
  kill -KILL "$ESBXD_PID"
  wait "$ESBXD_PID" 2>/dev/null || true
  ESBXD_PID=
  start_gateway
  wait_for 90 final "$idb"
  wait_for 90 final "$ida"
  state_is "$ida" landed
  state_is "$idb" landed
  # Each request landed once, a's check ran again.
  assert_equal "$(layer_count)" 3
  local la lb
  la=$(request_field "$ida" layer)
  lb=$(request_field "$idb" layer)
  [ "$la" != "$lb" ]
  assert_equal "$(grep -c . "$ESBX_ROOT/projects/p/stack")" 3
  [ "$(request_field "$ida" runs)" -ge 2 ]
  run -0 "$ESBX" show p:/b.txt
  run -0 "$ESBX" show p:/slow
  esbx_ok fsck p
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$BATS_TEST_TMPDIR/metrics"
  grep -q '^esbx_queue_landed_total{project="p"} ' "$BATS_TEST_TMPDIR/metrics"
  grep -q '^esbx_queue_depth{project="p"} 0' "$BATS_TEST_TMPDIR/metrics"
  run -0 "$ESBX" --json events a
  assert_output --partial "queue.landed"
}

@test "a session over frozen layers files all its work; gc keeps the layers until nothing names them" {
  esbx_ok project gate p --mode checks --check 'test -f before.txt && test -f after.txt && make test'
  make_sessions p a
  echo before >"$(path_of a)/before.txt"
  esbx_ok session snapshot a --name snap
  esbx_ok session fork a --name f
  echo after >"$(path_of a)/after.txt"
  echo fork >"$(path_of f)/fork.txt"
  run -5 "$ESBX" publish a --discard
  esbx_ok snapshot rm snap
  # Filed, not landed: the session still names its frozen layer.
  esbx_ok gc --snapshots
  [ "$(find "$ESBX_ROOT/projects/p/frozen" -mindepth 1 -maxdepth 1 | wc -l)" -ge 1 ]
  esbx_ok queue run p
  run -0 "$ESBX" show p:/before.txt
  assert_output before
  run -0 "$ESBX" show p:/after.txt
  assert_output after
  [ ! -d "$ESBX_ROOT/sessions/a" ]
  # The fork shares the layer; its request is rebased onto what a landed.
  esbx_ok project gate p --mode checks --check 'test -f before.txt && make test'
  run -5 "$ESBX" publish f --discard
  esbx_ok gc
  [ "$(find "$ESBX_ROOT/projects/p/frozen" -mindepth 1 -maxdepth 1 | wc -l)" -ge 1 ]
  esbx_ok queue run p
  run -0 "$ESBX" show p:/fork.txt
  assert_output fork
  # The fork's own snapshot, and a trash entry if its discard left one,
  # named them last.
  esbx_ok trash purge --all
  esbx_ok gc --snapshots
  [ "$(find "$ESBX_ROOT/projects/p/frozen" -mindepth 1 -maxdepth 1 | wc -l)" -eq 0 ]
}

@test "a git project's requests land as commits by their sessions' authors, on the commit they were checked on" {
  local GIT=(git -c user.name=Tester -c user.email=tester@example.org -c init.defaultBranch=master)
  local repo=$BATS_TEST_TMPDIR/repo
  cp -r "$BATS_TEST_TMPDIR/src" "$repo"
  "${GIT[@]}" -C "$repo" init -q
  "${GIT[@]}" -C "$repo" add -A
  "${GIT[@]}" -C "$repo" commit -qm "calc"
  esbx_ok project create g --from-git "$repo"
  # The check prints the commit it was given (author and subject) and the
  # tree beside its repository, then builds.
  local digest="find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -c1-64"
  esbx_ok project gate g --mode checks --check "git log -1 --format='commit %an %s'" \
    --check "$digest | sed 's/^/tree /'" --check 'make test'
  make_sessions g a b
  echo a >"$(path_of a)/a.txt"
  "${GIT[@]}" -C "$(path_of a)" add a.txt
  "${GIT[@]}" -C "$(path_of a)" -c user.name=Alice -c user.email=alice@example.org commit -qm "alice: a"
  echo b >"$(path_of b)/b.txt"
  "${GIT[@]}" -C "$(path_of b)" add b.txt
  "${GIT[@]}" -C "$(path_of b)" -c user.name=Bob -c user.email=bob@example.org commit -qm "bob: b"
  run -5 "$ESBX" --json publish a
  local ida idb
  ida=$(json_field request <<<"$output")
  run -5 "$ESBX" --json publish b
  idb=$(json_field request <<<"$output")
  esbx_ok queue run g
  state_is "$ida" landed
  state_is "$idb" landed
  # The project's history: two commits by their authors on the imported
  # one, each the layer its request landed.
  local c=$BATS_TEST_TMPDIR/clone
  git clone -q -b esbx/head "$("$ESBX" project git-dir g)" "$c"
  run -0 git -C "$c" log --format='%an <%ae> %s'
  assert_line --index 0 "Bob <bob@example.org> bob: b"
  assert_line --index 1 "Alice <alice@example.org> alice: a"
  assert_line --index 2 "Tester <tester@example.org> calc"
  git -C "$c" log -1 --format=%B | grep -qx "Esbx-Layer: $(request_field "$idb" layer)"
  git -C "$c" log -1 --skip=1 --format=%B | grep -qx "Esbx-Layer: $(request_field "$ida" layer)"
  git -C "$c" fsck --strict
  # Each check ran on its commit and on the tree that landed.
  local id layer log
  for id in "$ida" "$idb"; do
    layer=$(request_field "$id" layer)
    log=$("$ESBX" queue show "$id" --log)
    grep -qx "tree $(layer_digest "$layer" g "$digest")" <<<"$log"
  done
  "$ESBX" queue show "$ida" --log | grep -qx "commit Alice alice: a"
  "$ESBX" queue show "$idb" --log | grep -qx "commit Bob bob: b"
  # The sessions go on from their landed commits: a rebase is clean and
  # a session's next publish takes only its later commits.
  esbx_ok rebase a
  echo a2 >"$(path_of a)/a2.txt"
  "${GIT[@]}" -C "$(path_of a)" add a2.txt
  "${GIT[@]}" -C "$(path_of a)" -c user.name=Alice -c user.email=alice@example.org commit -qm "alice: a2"
  esbx_ok publish a --wait
  git -C "$c" fetch -q origin
  run -0 git -C "$c" log --format='%an %s' origin/esbx/head
  assert_line --index 0 "Alice alice: a2"
  assert_line --index 1 "Bob bob: b"
}
