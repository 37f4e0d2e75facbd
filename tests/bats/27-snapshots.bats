#!/usr/bin/env bats
# Snapshots, forks and bounded lifetimes (issue 15): `session snapshot`
# freezes the session while its upper is copied, forks share one copy of
# it, a fork publishes the snapshot's changes plus its own through the
# conflict gate, and sessions past their ttl or idle-ttl are retired by
# esbxd or `esbx gc`.

load helpers

# The top frozen layer of snapshot $1: what its session had written since
# the layer under it.
snapdir() {
  local id
  id=$(jq -r '.frozen[-1]' "$ESBX_ROOT/projects/p/snapshots/$1/record.json")
  echo "$ESBX_ROOT/projects/p/frozen/$id/diff"
}

@test "a snapshot is an immutable copy of the session's changes, whiteouts included" {
  setup_session
  echo changed >"$m/README"
  rm "$m/docs/guide.txt"
  mkdir "$m/new" && echo n >"$m/new/file"
  esbx_ok session snapshot s1 --name snap
  assert_output "snap"
  d=$(snapdir snap)
  [ "$(cat "$d/README")" = changed ]
  [ "$(stat -c %t:%T "$d/docs/guide.txt")" = 0:0 ]
  [ "$(cat "$d/new/file")" = n ]
  # The session goes on; the snapshot does not follow.
  echo later >"$m/README"
  [ "$(cat "$d/README")" = changed ]
  esbx_ok --json snapshot inspect snap
  echo "$output" | jq -e '.project == "p" and .session == "s1" and .parent == null'
  esbx_ok snapshot list
  assert_line --index 0 --regexp '^NAME'
  assert_output --partial "snap"
  esbx_fails 1 session snapshot s1 --name snap
  assert_output --partial "snapshot \`snap\`"
  esbx_fails 1 snapshot inspect nosuch
}

@test "a snapshot moves the upper into a frozen layer: nothing copied, the session goes on over it" {
  setup_session
  head -c 20M /dev/urandom >"$m/big.bin"
  echo keep >"$m/keep.txt"
  sum=$(sha256sum <"$m/big.bin")
  ino=$(stat -c %i "$ESBX_ROOT/sessions/s1/upper/big.bin")
  # An idle holder: only it runs, its workspace moves over the new layer.
  esbx_ok exec s1 -- true
  esbx_ok session snapshot s1 --name snap
  d=$(snapdir snap)
  # The same file, renamed, not a copy; the session's upper starts empty.
  [ "$(stat -c %i "$d/big.bin")" = "$ino" ]
  [ -z "$(ls -A "$ESBX_ROOT/sessions/s1/upper")" ]
  esbx_ok --json session inspect s1
  echo "$output" | jq -e --arg id "$(basename "$(dirname "$d")")" '.frozen == [$id] and .snapshot == null'
  # The session goes on: it sees its files, from the host and from inside;
  # what it writes now is its own, never the snapshot's.
  [ "$(sha256sum <"$m/big.bin")" = "$sum" ]
  esbx_ok exec s1 -- sh -c 'cat keep.txt; echo later >keep.txt; echo new >new.txt'
  assert_output keep
  [ "$(cat "$d/keep.txt")" = keep ]
  [ ! -e "$d/new.txt" ]
  [ "$(cat "$m/keep.txt")" = later ]
  esbx_ok diff s1
  assert_output "$(printf 'A /big.bin\nA /keep.txt\nA /new.txt')"
  esbx_ok events s1
  assert_output --partial 'snapshot snapshot=snap moved=true'
  # A process of the session writing through a descriptor it keeps open
  # keeps the view: the upper is copied, and what it writes after the
  # snapshot never reaches the snapshot.
  # shellcheck disable=SC2016
  esbx_ok exec s1 --detach -- sh -c 'exec 3>>w.log; while :; do echo x >&3; sleep 0.02; done'
  until [ -s "$m/w.log" ]; do sleep 0.05; done
  esbx_ok session snapshot s1 --name busy
  n=$(stat -c %s "$(snapdir busy)/w.log")
  sleep 0.3
  [ "$(stat -c %s "$(snapdir busy)/w.log")" = "$n" ]
  [ "$(stat -c %s "$m/w.log")" -gt "$n" ]
  esbx_ok events s1
  assert_output --partial 'snapshot snapshot=busy moved=false'
  [ "$(cat "$(snapdir busy)/keep.txt")" = later ]
  [ -s "$ESBX_ROOT/sessions/s1/upper/keep.txt" ]
  esbx_ok publish s1 -m all
  make_session p check
  [ "$(sha256sum <"$m/big.bin")" = "$sum" ]
  [ -s "$m/w.log" ]
  [ "$(cat "$m/new.txt")" = new ]
}

@test "a view mounted in another mount namespace keeps the upper: the snapshot copies it" {
  setup_session
  echo one >"$m/a.txt"
  # A mount namespace of its own holds a mount of the view (as a
  # container's bind does) after esbx unmounts its own.
  unshare -m --propagation private sleep 60 &
  ns=$!
  until [ "$(readlink /proc/$ns/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ]; do sleep 0.02; done
  esbx_ok session snapshot s1 --name held
  esbx_ok events s1
  assert_output --partial 'snapshot snapshot=held moved=false'
  # What is written through that mount after the snapshot lands in the
  # session's upper, never in the snapshot.
  nsenter -t "$ns" -m sh -c "echo two >'$m/a.txt'"
  kill "$ns"
  wait "$ns" || true
  [ "$(cat "$(snapdir held)/a.txt")" = one ]
  [ "$(cat "$ESBX_ROOT/sessions/s1/upper/a.txt")" = two ]
}

@test "a snapshot taken while a detached process writes is a consistent point" {
  setup_session
  # The writer appends i to the log, then writes i to the counter: at any
  # instant the log's last line is the counter or one more.  A copy made
  # while it runs (counter first, log after) would see the log run ahead.
  # shellcheck disable=SC2016
  esbx_ok exec s1 --detach -- sh -c 'i=0; while :; do i=$((i+1)); echo $i >>log; echo $i >counter.tmp; mv counter.tmp counter; done'
  until [ -s "$m/counter" ]; do sleep 0.05; done
  for k in $(seq 1 15); do
    esbx_ok session snapshot s1 --name "c$k"
    d=$(snapdir "c$k")
    c=$(cat "$d/counter")
    l=$(tail -n 1 "$d/log")
    echo "snapshot $k: counter $c, log $l"
    [ "$l" -eq "$c" ] || [ "$l" -eq $((c + 1)) ]
  done
  # Thawed after each one: the writer still runs.
  c1=$(cat "$m/counter")
  sleep 0.2
  [ "$(cat "$m/counter")" -gt "$c1" ]
}

@test "fork tree: three forks publish disjoint changes, each layer carries the snapshot's once" {
  setup_session
  echo from-s >"$m/README"
  echo shared >"$m/shared.txt"
  rm "$m/docs/guide.txt"
  esbx_ok session snapshot s1 --name snap
  for f in f1 f2 f3; do
    esbx_ok session create p --from-snapshot snap --name "$f"
    fm=$(path_of "$f")
    [ "$(cat "$fm/README")" = from-s ]
    [ ! -e "$fm/docs/guide.txt" ]
    echo "$f" >"$fm/$f.txt"
  done
  esbx_ok diff f1
  assert_output "$(printf 'M /README\nD /docs/guide.txt\nA /f1.txt\nA /shared.txt')"
  for f in f1 f2 f3; do
    esbx_ok publish "$f" -m "$f"
  done
  esbx_ok --json project log p
  echo "$output" | jq -e 'length == 4'
  for id in $(echo "$output" | jq -r '.[0:3][].id'); do
    rec=$ESBX_ROOT/projects/p/layers/$id/record.json
    jq -e '[.changes[].path] | (map(select(. == "/README")) | length == 1)
           and (map(select(. == "/shared.txt")) | length == 1)
           and (map(select(. == "/docs/guide.txt")) | length == 1)' "$rec"
  done
  make_session p head
  for f in f1 f2 f3; do [ "$(cat "$m/$f.txt")" = "$f" ]; done
  [ "$(cat "$m/README")" = from-s ]
  [ ! -e "$m/docs/guide.txt" ]
  # Nothing of the forks' scans is left behind.
  [ -z "$(ls "$ESBX_ROOT/tmp")" ]
}

@test "two forks changing a snapshot file differently conflict; the same change does not" {
  setup_session
  echo base-of-forks >"$m/shared.txt"
  esbx_ok session snapshot s1 --name snap
  esbx_ok session create p --from-snapshot snap --name a
  esbx_ok session create p --from-snapshot snap --name b
  echo from-a >"$(path_of a)/shared.txt"
  echo from-b >"$(path_of b)/shared.txt"
  esbx_ok publish a
  esbx_fails 3 publish b
  assert_output --partial "/shared.txt"
  # A fork that makes the same change as a publishes: the same final state
  # is not a conflict.
  esbx_ok session create p --from-snapshot snap --name d
  echo from-a >"$(path_of d)/shared.txt"
  echo d >"$(path_of d)/d.txt"
  esbx_ok publish d
}

@test "a fork that conflicts rebases and publishes; the snapshot and its other forks stay as they were" {
  setup_store
  mkdir "$BATS_TEST_TMPDIR/src"
  printf '1\n2\n3\n4\n5\n6\n' >"$BATS_TEST_TMPDIR/src/shared.txt"
  echo gone >"$BATS_TEST_TMPDIR/src/gone.txt"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  make_session p s1
  rm "$m/gone.txt"
  mkdir "$m/dir" && echo own >"$m/dir/own.txt"
  esbx_ok session snapshot s1 --name snap
  esbx_ok session create p --from-snapshot snap --name a
  esbx_ok session create p --from-snapshot snap --name b
  sed -i 's/^2$/2 by a/' "$(path_of a)/shared.txt"
  sed -i 's/^5$/5 by b/' "$(path_of b)/shared.txt"
  echo b >"$(path_of b)/dir/b.txt"
  esbx_ok publish a
  esbx_fails 3 publish b
  esbx_ok rebase b
  assert_output --partial "merged: /shared.txt"
  run cat "$(path_of b)/shared.txt"
  assert_output "$(printf '1\n2 by a\n3\n4\n5 by b\n6')"
  # What the snapshot gave it: its deletion, its directory.
  [ ! -e "$(path_of b)/gone.txt" ]
  [ "$(cat "$(path_of b)/dir/own.txt")" = own ]
  # The fork is a session of its own now: it no longer holds the snapshot.
  esbx_ok --json session inspect b
  echo "$output" | jq -e '.snapshot == null'
  esbx_ok --json snapshot inspect snap
  echo "$output" | jq -e '.sessions == ["a"]'
  echo more >"$(path_of b)/dir/own.txt"
  esbx_ok publish b
  esbx_ok show p:/shared.txt
  assert_output "$(printf '1\n2 by a\n3\n4\n5 by b\n6')"
  esbx_ok show p:/dir/own.txt
  assert_output more
  # The snapshot's files were copied, not shared: the snapshot and a new
  # fork of it still read what it froze.
  [ "$(cat "$(snapdir snap)/dir/own.txt")" = own ]
  esbx_ok session create p --from-snapshot snap --name c
  [ "$(cat "$(path_of c)/dir/own.txt")" = own ]
  [ ! -e "$(path_of c)/dir/b.txt" ]
  [ -z "$(ls -A "$ESBX_ROOT/tmp")" ]
}

@test "a session that took a snapshot rebases into its upper: the merge is kept, upstream's change is not undone" {
  setup_store
  mkdir "$BATS_TEST_TMPDIR/src"
  printf '1\n2\n3\n4\n5\n6\n' >"$BATS_TEST_TMPDIR/src/shared.txt"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  make_session p s1
  sed -i 's/^2$/2 by s1/' "$m/shared.txt"
  esbx_ok session snapshot s1 --name snap
  make_session p o
  sed -i 's/^5$/5 by o/' "$m/shared.txt"
  esbx_ok publish o --discard
  esbx_fails 3 publish s1
  esbx_ok rebase s1
  assert_output --partial "merged: /shared.txt"
  run cat "$(path_of s1)/shared.txt"
  assert_output "$(printf '1\n2 by s1\n3\n4\n5 by o\n6')"
  esbx_ok publish s1
  esbx_ok show p:/shared.txt
  assert_output "$(printf '1\n2 by s1\n3\n4\n5 by o\n6')"
  run cat "$(snapdir snap)/shared.txt"
  assert_output "$(printf '1\n2 by s1\n3\n4\n5\n6')"
}

@test "session fork: snapshot plus create, the fork starts with the session's files" {
  setup_session
  echo work >"$m/work.txt"
  esbx_ok session fork s1 --name f
  assert_output "f"
  [ "$(cat "$(path_of f)/work.txt")" = work ]
  esbx_ok --json session inspect f
  snap=$(echo "$output" | jq -r .snapshot)
  [ -d "$(snapdir "$snap")" ]
  # The fork of a fork stacks the snapshots.
  echo more >"$(path_of f)/more.txt"
  esbx_ok session fork f --name ff
  [ "$(cat "$(path_of ff)/work.txt")" = work ]
  [ "$(cat "$(path_of ff)/more.txt")" = more ]
  esbx_ok --json snapshot inspect "$snap"
  echo "$output" | jq -e '.sessions == ["f"] and (.children | length == 1)'
  esbx_fails 2 session fork s1 --base head
}

@test "snapshot rm refuses while used; gc removes unused ones only with --snapshots" {
  setup_session
  echo x >"$m/x"
  esbx_ok session snapshot s1 --name used
  esbx_ok session snapshot s1 --name unused
  esbx_ok session create p --from-snapshot used --name f
  esbx_fails 1 snapshot rm used
  assert_output --partial "in use by session \`f\`"
  esbx_ok gc
  [ -d "$(snapdir unused)" ]
  esbx_ok gc --snapshots
  assert_output --partial "removed snapshot \`unused\`"
  [ ! -e "$(snapdir unused)" ]
  [ -d "$(snapdir used)" ]
  esbx_ok discard --force f
  esbx_ok snapshot rm used
  [ ! -e "$ESBX_ROOT/projects/p/snapshots/used" ]
}

@test "ten forks of a snapshot of 100 changed files cost it once plus their own changes" {
  setup_session
  mkdir "$m/data"
  for i in $(seq 1 100); do head -c 8192 /dev/urandom >"$m/data/f$i"; done
  esbx_ok session snapshot s1 --name big
  for i in $(seq 1 10); do
    esbx_ok session create p --from-snapshot big --name "k$i"
    echo "own $i" >"$(path_of "k$i")/own.txt"
  done
  snap_kb=$(du -sk "$(snapdir big)" | cut -f1)
  forks_kb=$(du -sck "$ESBX_ROOT"/sessions/k*/upper | tail -n 1 | cut -f1)
  echo "snapshot ${snap_kb}K, ten forks' uppers ${forks_kb}K"
  [ "$snap_kb" -ge 800 ]
  # Ten copies would be 8 MB; their own changes are a few KB.
  [ "$forks_kb" -lt 200 ]
}

@test "kill -9 during a snapshot leaves no half snapshot and the session untouched" {
  if ! strings "$ESBX" | grep -qx 'ESBX_FAILPOINT'; then
    skip "esbx built without ESBX_FAILPOINTS"
  fi
  setup_session
  echo keep >"$m/keep.txt"
  esbx_ok exec s1 --detach -- sleep 300
  run env ESBX_FAILPOINT=snapshot-copied "$ESBX" session snapshot s1 --name half
  [ "$status" -eq 137 ] || [ "$status" -ne 0 ]
  [ ! -e "$ESBX_ROOT/projects/p/snapshots/half" ]
  esbx_ok snapshot list
  refute_output --partial half
  esbx_ok gc
  [ -z "$(ls "$ESBX_ROOT/projects/p/tmp")" ]
  # Thawed and whole: commands run, the files are as they were.
  run timeout 10 "$ESBX" exec s1 -- cat keep.txt
  assert_success
  assert_output keep
  esbx_ok diff s1
  assert_output "A /keep.txt"
  esbx_ok session snapshot s1 --name half
}

@test "--ttl: esbx gc retires an expired session when no daemon runs" {
  setup_project
  esbx_ok session create p --name short --ttl 1s
  esbx_ok session create p --name long --ttl 1h
  esbx_ok session list
  assert_line --index 0 "$(printf 'NAME\tPROJECT\tBASE\tSTATE\tAGE\tIDLE\tEXPIRES')"
  assert_output --regexp "long.*in [0-9]+m \(ttl\)"
  sleep 2
  esbx_ok gc
  assert_output --partial "retired session \`short\` (ttl)"
  esbx_fails 1 session inspect short
  esbx_ok session inspect long
  esbx_fails 2 session create p --ttl soon
  esbx_fails 2 session create p --on-expiry keep
}

@test "--ttl with esbxd: the daemon retires the session and counts it in /metrics" {
  [ -x "$ESBX_BUILD/volume-plugin/esbxd" ] || skip "esbxd not built"
  load gateway_helpers
  ESBXD_EXPIRY_INTERVAL_MS=200 setup_gateway
  esbx_ok project create p
  esbx_ok session create p --name brief --ttl 2s
  m=$(path_of brief)
  echo unpublished >"$m/work.txt"
  for i in $(seq 1 50); do
    "$ESBX" session inspect brief >/dev/null 2>&1 || break
    sleep 0.2
  done
  esbx_fails 1 session inspect brief
  # Unpublished work went to the trash.
  esbx_ok --json trash list
  echo "$output" | jq -e '.[0].session == "brief"'
  run curl -sf "http://127.0.0.1:$METRICS_PORT/metrics"
  assert_output --partial "esbx_session_expiries_total 1"
  teardown_gateway
}

@test "--idle-ttl is postponed by an exec" {
  setup_project
  # gc runs past the first 6 s of the session and 3 s after the exec: an
  # exec (a holder's start) of up to 3 s on a loaded host still counts.
  esbx_ok session create p --name idle --idle-ttl 6s
  sleep 4
  esbx_ok exec idle -- true
  sleep 3
  esbx_ok gc
  refute_output --partial "retired"
  esbx_ok session inspect idle
  esbx_ok --json session list
  echo "$output" | jq -e '.[0].lifetime.idle_ttl == 6 and .[0].lifetime.idle < 6'
  sleep 4
  esbx_ok gc
  assert_output --partial "retired session \`idle\` (idle-ttl)"
}

@test "--on-expiry snapshot keeps a snapshot whose files match" {
  setup_project
  esbx_ok session create p --name w --ttl 2s --on-expiry snapshot
  m=$(path_of w)
  echo result >"$m/result.txt"
  rm "$m/README"
  sleep 3
  esbx_ok gc
  assert_output --regexp "retired session \`w\` \(ttl\): kept as snapshot \`w-expired-[0-9a-f]+\`"
  # shellcheck disable=SC2016
  snap=$(echo "$output" | sed -n 's/.*kept as snapshot `\(.*\)`.*/\1/p')
  esbx_ok session create p --from-snapshot "$snap" --name back
  [ "$(cat "$(path_of back)/result.txt")" = result ]
  [ ! -e "$(path_of back)/README" ]
  # No trash entry: the snapshot holds the work.
  esbx_ok --json trash list
  assert_output "[]"
}

@test "project lifetime defaults apply to new sessions" {
  setup_project
  esbx_ok project lifetime p --idle-ttl 30m --on-expiry snapshot
  esbx_ok session create p --name d
  esbx_ok --json session inspect d
  echo "$output" | jq -e '.lifetime.idle_ttl == 1800 and .lifetime.on_expiry == "snapshot"'
  esbx_ok session create p --name e --idle-ttl 1m
  esbx_ok --json session inspect e
  echo "$output" | jq -e '.lifetime.idle_ttl == 60'
}

@test "exports of a fork carry the snapshot's changes and its own" {
  setup_session
  echo from-snapshot >"$m/README"
  esbx_ok session snapshot s1 --name base1
  esbx_ok session fork s1 --name f1
  echo own >"$(path_of f1)/own"
  esbx_ok export f1 -o "$BATS_TEST_TMPDIR/f1.tar"
  run tar -xOf "$BATS_TEST_TMPDIR/f1.tar" README
  assert_output from-snapshot
  esbx_ok export f1 --format oci-layer -o "$BATS_TEST_TMPDIR/f1.layer"
  run tar -tf "$BATS_TEST_TMPDIR/f1.layer"
  assert_line --regexp '^(\./)?README$'
  assert_line --regexp '^(\./)?own$'
  run tar -xOf "$BATS_TEST_TMPDIR/f1.layer" README
  assert_output from-snapshot
}

@test "a fork in the trash keeps its snapshot from rm and gc --snapshots" {
  setup_session
  echo s >"$m/README"
  esbx_ok session snapshot s1 --name keep1
  esbx_ok session create p --name f1 --from-snapshot keep1
  echo work >"$(path_of f1)/work"
  esbx_ok discard f1
  esbx_ok discard --force s1
  esbx_fails 1 snapshot rm keep1
  assert_output --partial "trash entry"
  esbx_ok gc --snapshots
  esbx_ok snapshot inspect keep1
  local entry
  entry=$("$ESBX" --json trash list | jq -r '.[0].entry // .[0].name')
  esbx_ok trash restore "$entry"
  run cat "$(path_of f1)/work"
  assert_output work
  run cat "$(path_of f1)/README"
  assert_output s
}

@test "frozen layers live while a session, a snapshot or a trash entry names them; gc removes them after" {
  setup_session
  echo one >"$m/one.txt"
  esbx_ok session snapshot s1 --name a
  id=$(basename "$(dirname "$(snapdir a)")")
  echo two >"$m/two.txt"
  # The name goes; the layer stays under the session that stacks it.
  esbx_ok snapshot rm a
  esbx_ok gc --snapshots
  [ -d "$ESBX_ROOT/projects/p/frozen/$id/diff" ]
  [ "$(cat "$m/one.txt")" = one ]
  # In the trash, the session keeps it; restored, it is whole.
  esbx_ok discard s1
  esbx_ok gc
  [ -d "$ESBX_ROOT/projects/p/frozen/$id/diff" ]
  entry=$("$ESBX" --json trash list | jq -r '.[0].entry // .[0].name')
  esbx_ok trash restore "$entry"
  m=$(path_of s1)
  [ "$(cat "$m/one.txt")" = one ]
  [ "$(cat "$m/two.txt")" = two ]
  esbx_ok diff s1
  assert_output "$(printf 'A /one.txt\nA /two.txt')"
  # Nothing names it any more: the next gc removes it, and only it.
  esbx_ok session snapshot s1 --name b
  esbx_ok discard --force s1
  esbx_ok gc
  [ -d "$ESBX_ROOT/projects/p/frozen/$id/diff" ]
  esbx_ok snapshot rm b
  esbx_ok gc
  assert_output --partial "projects/p/frozen/$id, which nothing uses"
  [ -z "$(ls "$ESBX_ROOT/projects/p/frozen")" ]
}
