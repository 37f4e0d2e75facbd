#!/usr/bin/env bats
# Several hosts on one machine, each in a network namespace of its own
# (remote_helpers.bash, setup_remote_netns): the registry and etcd run in a
# third namespace and are reached only through each host's veth pair.
# Host A creates and shares the project; B and C publish concurrently.

load remote_helpers

setup_file() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed"
  command -v etcd >/dev/null || skip "etcd is not installed"
  setup_remote_netns
}

teardown_file() {
  teardown_remote_netns
}

setup() {
  etcd_clear
  new_host A
  new_host B
  new_host C
  make_model_tree "$BATS_TEST_TMPDIR/src"
  on A esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
  on A esbx_ok project push p
}

teardown() {
  [ -z "${LISTENER_PID:-}" ] || kill "$LISTENER_PID" 2>/dev/null || true
  teardown_hosts
}

# A tree with a file of each kind per publisher N (1..16) to change:
# src/mN.txt (modified), src/rN.txt (removed), bin/xN (made executable),
# own/oN (rewritten and given another owner; a change of owner alone is
# not a change for scan.c, locally either); and files nobody touches.
make_model_tree() {
  local dir=$1 n
  mkdir -p "$dir/src" "$dir/bin" "$dir/own" "$dir/docs"
  for n in $(seq 1 16); do
    printf 'm%s\n' "$n" >"$dir/src/m$n.txt"
    printf 'r%s\n' "$n" >"$dir/src/r$n.txt"
    printf '#!/bin/sh\necho %s\n' "$n" >"$dir/bin/x$n"
    printf 'o%s\n' "$n" >"$dir/own/o$n"
  done
  printf 'shared\n' >"$dir/docs/guide.txt"
  ln -s docs/guide.txt "$dir/guide"
  chmod 644 "$dir"/bin/*
}

# Publisher N's change, in DIR (a session's merged view or the model).
apply_change() {
  local dir=$1 n=$2
  printf 'changed by %s\n' "$n" >>"$dir/src/m$n.txt"
  rm "$dir/src/r$n.txt"
  chmod 755 "$dir/bin/x$n"
  printf 'owned by %s\n' "$n" >"$dir/own/o$n"
  chown "$((1000 + n)):$((2000 + n))" "$dir/own/o$n"
  mkdir -p "$dir/new/p$n/sub"
  printf 'new %s\n' "$n" >"$dir/new/p$n/sub/file"
  ln -s "../../src/m$n.txt" "$dir/new/p$n/link"
}

# `export_head H FILE`: host H's export of p's head.
export_head() {
  on "$1" esbx_ok export p -o "$2"
}

# DIR as a deterministic tar on stdout: names sorted, numeric owners, one
# mtime.  Every file a publish writes gets the time of the publish
# (README, "File times of published files"), so a model made with cp
# cannot have the head's mtimes; everything else must be the same.
canonical_tar() {
  tar --sort=name --mtime=@0 --numeric-owner --format=gnu -C "$1" -cf - .
}

# Files, types, modes, owners, sizes, link targets and contents of DIR, one
# line each, sorted: what `diff` shows when the byte comparison fails.
listing() {
  (cd "$1" && find . -printf '%y %m %U:%G %s %p -> %l\n' | sort &&
    find . -type f -exec sha256sum {} + | sort -k2)
}

# Host H's export of p's head, unpacked, is the tree MODEL, byte for byte
# as canonical tars.
compare_with_model() {
  local h=$1 model=$2 got=$BATS_TEST_TMPDIR/head-$1
  export_head "$h" "$got.tar"
  mkdir "$got"
  tar -xpf "$got.tar" -C "$got"
  if ! cmp <(canonical_tar "$model") <(canonical_tar "$got"); then
    diff <(listing "$model") <(listing "$got") >&2 || true
    echo "host $h: the head differs from the model" >&2
    return 1
  fi
}

# The exports of hosts H1 and H2 (export_head'ed to head-H.tar) are the same
# bytes; if not, what differs.
same_export() {
  local a=$BATS_TEST_TMPDIR/head-$1.tar b=$BATS_TEST_TMPDIR/head-$2.tar
  cmp "$a" "$b" && return 0
  diff <(tar -tv --full-time -f "$a") <(tar -tv --full-time -f "$b") >&2
  return 1
}

@test "the namespaces isolate: a host reaches the services through its veth only" {
  # Something on 127.0.0.1:REGISTRY_PORT of the root namespace, reachable
  # from there...
  python3 -m http.server --bind 127.0.0.1 "$REGISTRY_PORT" >/dev/null 2>&1 &
  LISTENER_PID=$!
  local i
  for i in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$REGISTRY_PORT/" && break
    sleep 0.1
  done
  curl -s -o /dev/null "http://127.0.0.1:$REGISTRY_PORT/"
  # ...but not from a host: its loopback is its own, and nothing listens.
  run on A curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$REGISTRY_PORT/"
  [ "$status" -eq 7 ]
  run on A curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$ETCD_PORT/health"
  [ "$status" -eq 7 ]
  # The services answer on the bridge, and esbx pointed at the root
  # namespace's loopback fails naming it.
  on B curl -fsS -o /dev/null "http://$REMOTE_ADDR:$REGISTRY_PORT/v2/"
  on C curl -fsS -o /dev/null "http://$REMOTE_ADDR:$ETCD_PORT/health"
  run on B env ESBX_REGISTRY="http://127.0.0.1:$REGISTRY_PORT/x" "$ESBX" project pull p
  assert_failure 1
  assert_output --partial "http://127.0.0.1:$REGISTRY_PORT"
  [ ! -e "$HOST_B/projects/p" ]
  # Each host is its own address on the bridge, and has its own esbxd.
  run on B ip -4 -o addr show dev eth0
  assert_output --partial "$HOSTADDR_B/24"
  start_host_esbxd B
  start_host_esbxd C
  on B esbx_ok project pull p
  local tok
  tok=$(on B "$ESBX" token create --scope observe)
  run env ESBX_HOST="unix://$GWSOCK_B" ESBX_TOKEN="$tok" "$ESBX" project list
  assert_success
  assert_output --partial p
}

@test "16 publishers on two namespaced hosts: all land, 16 layers, every host's head is the model" {
  local h n
  on B esbx_ok project pull p
  on C esbx_ok project pull p
  for n in $(seq 1 16); do
    h=$([ "$n" -le 8 ] && echo B || echo C)
    on "$h" esbx_ok session create p --name "s$n"
    apply_change "$(on "$h" "$ESBX" session path "s$n")" "$n"
  done
  # Every session started from the head A pushed.
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  diff "$HOST_A/projects/p/stack" "$HOST_C/projects/p/stack"
  local base
  base=$(cat "$HOST_A/projects/p/stack")
  for n in $(seq 1 16); do
    h=$([ "$n" -le 8 ] && echo B || echo C)
    on "$h" "$ESBX" publish "s$n" -m "publisher $n" >"$BATS_TEST_TMPDIR/out-$n" 2>&1 &
    echo $! >>"$BATS_TEST_TMPDIR/publishers"
  done
  local failed=0 pid
  while read -r pid; do
    wait "$pid" || failed=$((failed + 1))
  done <"$BATS_TEST_TMPDIR/publishers"
  cat "$BATS_TEST_TMPDIR"/out-* >&2
  [ "$failed" -eq 0 ]

  # Exactly 16 new layers on top of A's, in etcd and, after a sync, on
  # every host.
  local head
  head=$(etcd_head p)
  [ "$(echo "$head" | jq -r '.layers[0]')" = "$base" ]
  [ "$(echo "$head" | jq '.layers | length')" -eq 17 ]
  [ "$(echo "$head" | jq -r '.layers[]' | sort -u | wc -l)" -eq 17 ]
  for h in A B C; do
    on "$h" esbx_ok project pull p
    [ "$(echo "$head" | jq -r '.layers[]')" = "$(cat "$HOST_A/projects/p/stack")" ]
    diff "$HOST_A/projects/p/stack" "$(eval echo "\$HOST_$h")/projects/p/stack"
  done
  run on C "$ESBX" project log p
  for n in $(seq 1 16); do
    assert_output --partial "publisher $n"
  done

  # The model: the same 16 changes applied with cp to a copy of the tree.
  local model=$BATS_TEST_TMPDIR/model
  cp -a "$BATS_TEST_TMPDIR/src" "$model"
  for n in $(seq 1 16); do
    apply_change "$model" "$n"
  done
  for h in A B C; do
    compare_with_model "$h" "$model"
  done
  # And the exports themselves, publish times included, are the same
  # bytes on every host.
  for h in B C; do
    same_export A "$h"
  done
  on B esbx_ok fsck p
  on C esbx_ok fsck p
}

@test "overlapping publishes from two namespaced hosts: one wins, the other exits 3, rebases and lands" {
  local h
  for h in B C; do
    on "$h" esbx_ok project pull p
    on "$h" make_session p "$h"
    printf 'from %s\n' "$h" >>"$m/src/m1.txt"
    printf '%s only\n' "$h" >"$m/$h-only.txt"
  done
  on B "$ESBX" publish B >"$BATS_TEST_TMPDIR/out-B" 2>&1 &
  local pid_b=$!
  on C "$ESBX" publish C >"$BATS_TEST_TMPDIR/out-C" 2>&1 &
  local pid_c=$! rc_b=0 rc_c=0
  wait "$pid_b" || rc_b=$?
  wait "$pid_c" || rc_c=$?
  cat "$BATS_TEST_TMPDIR"/out-* >&2
  local win lose
  if [ "$rc_b" -eq 0 ] && [ "$rc_c" -eq 3 ]; then
    win=B lose=C
  elif [ "$rc_c" -eq 0 ] && [ "$rc_b" -eq 3 ]; then
    win=C lose=B
  else
    echo "wanted one 0 and one 3, got B=$rc_b C=$rc_c" >&2
    return 1
  fi
  grep -q "/src/m1.txt" "$BATS_TEST_TMPDIR/out-$lose"
  [ "$(etcd_head p | jq '.layers | length')" -eq 2 ]
  # The loser keeps its session and its work.
  run on "$lose" "$ESBX" diff "$lose"
  assert_line "M /src/m1.txt"
  assert_line "A /$lose-only.txt"
  # Rebase on its own host (a three-way merge of the appended lines
  # conflicts: resolve it), then publish through that host's esbxd.
  run on "$lose" "$ESBX" rebase "$lose"
  local mm
  mm=$(on "$lose" "$ESBX" session path "$lose")
  printf 'm1\nfrom %s\nfrom %s\n' "$win" "$lose" >"$mm/src/m1.txt"
  start_host_esbxd "$lose"
  local sock_var="GWSOCK_$lose" tok
  tok=$(on "$lose" "$ESBX" token create --scope manage)
  run env ESBX_HOST="unix://${!sock_var}" ESBX_TOKEN="$tok" "$ESBX" publish "$lose"
  assert_success
  [ "$(etcd_head p | jq '.layers | length')" -eq 3 ]
  for h in A B C; do
    on "$h" esbx_ok project pull p
  done
  for h in A B C; do
    export_head "$h" "$BATS_TEST_TMPDIR/head-$h.tar"
  done
  same_export A B
  same_export A C
  mkdir "$BATS_TEST_TMPDIR/a"
  tar -xf "$BATS_TEST_TMPDIR/head-A.tar" -C "$BATS_TEST_TMPDIR/a"
  [ "$(cat "$BATS_TEST_TMPDIR/a/src/m1.txt")" = "$(printf 'm1\nfrom %s\nfrom %s' "$win" "$lose")" ]
  [ "$(cat "$BATS_TEST_TMPDIR/a/B-only.txt")" = "B only" ]
  [ "$(cat "$BATS_TEST_TMPDIR/a/C-only.txt")" = "C only" ]
}

@test "a pulled layer keeps the publisher's times: deletions do not touch their directory" {
  on A make_session p a
  rm "$m/src/r1.txt" "$m/docs/guide.txt"
  on A esbx_ok publish a
  # A pull in a later second than the publish: a whiteout made then would
  # give its directory that second.
  sleep 1.1
  on B esbx_ok project pull p
  export_head A "$BATS_TEST_TMPDIR/head-A.tar"
  export_head B "$BATS_TEST_TMPDIR/head-B.tar"
  same_export A B
  local top
  top=$(tail -n1 "$HOST_A/projects/p/stack")
  # (Whole seconds: a layer blob's tar entries carry no more.)
  [ "$(stat -c %Y "$HOST_A/projects/p/layers/$top/diff/docs")" = \
    "$(stat -c %Y "$HOST_B/projects/p/layers/$top/diff/docs")" ]
}
