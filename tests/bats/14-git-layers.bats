#!/usr/bin/env bats
# What a layer of a git project costs: its pack holds the objects it adds
# (not the whole tree again), and a session create or a publish reads the
# layer's commit from the end of its record, not the record whole.  The
# git command is the oracle.

load helpers
bats_require_minimum_version 1.5.0

GIT=(git -c user.name=Tester -c user.email=tester@example.org -c init.defaultBranch=master)

# A repository of N files in nested directories (d0..d9/e0..e4/fK), one
# commit; its path in $REPO.
make_repo() {
  local n=$1 i
  REPO=$BATS_TEST_TMPDIR/repo
  mkdir -p "$REPO"
  for ((i = 0; i < n; i++)); do
    mkdir -p "$REPO/d$((i % 10))/e$((i % 5))"
    printf 'file %d\n' "$i" >"$REPO/d$((i % 10))/e$((i % 5))/f$i"
  done
  "${GIT[@]}" -C "$REPO" init -q
  "${GIT[@]}" -C "$REPO" add -A
  "${GIT[@]}" -C "$REPO" commit -qm first
}

top_layer() { tail -n1 "$ESBX_ROOT/projects/$1/stack"; }

# The object ids of the packs of layer L of project P, sorted.
layer_objects() {
  local idx
  for idx in "$ESBX_ROOT/projects/$1/layers/$2/diff/.git/objects/pack/"*.idx; do
    git show-index <"$idx" | cut -d' ' -f2
  done | sort
}

@test "a published layer's pack holds the objects it adds, not the whole tree" {
  make_repo 200
  esbx_ok project create r --from-git "$REPO"
  make_session r s
  echo edited >>"$m/d1/e1/f11"
  echo edited >>"$m/d3/e3/f13"
  rm "$m/d2/e2/f2"
  mkdir -p "$m/new/deeper"
  echo new >"$m/new/deeper/g"
  esbx_ok publish s -m change
  gd=$("$ESBX" project git-dir r)
  # What the commit adds over its parent: itself, the trees on the way to
  # the four changed paths, three new blobs.
  run git --git-dir "$gd" rev-list --objects esbx/head --not esbx/head~1
  assert_success
  want=$(printf '%s\n' "$output" | cut -d' ' -f1 | sort)
  [ "$(printf '%s\n' "$want" | wc -l)" -eq 13 ]
  run layer_objects r "$(top_layer r)"
  assert_success
  assert_output "$want"
  run git --git-dir "$gd" fsck --strict
  assert_success
  # The head's tree is the session's.
  rm -rf "$BATS_TEST_TMPDIR/clone"
  "${GIT[@]}" clone -q -b esbx/head "$gd" "$BATS_TEST_TMPDIR/clone"
  diff -r -x .git "$m" "$BATS_TEST_TMPDIR/clone"

  # A session's own commit, carried through a rebase, packs the same way.
  make_session r t
  echo again >>"$m/d1/e1/f21"
  "${GIT[@]}" -C "$m" commit -qam "in t"
  make_session r u
  echo other >>"$m/d4/e4/f4"
  esbx_ok publish u -m other
  esbx_ok rebase t
  esbx_ok publish t
  run git --git-dir "$gd" fsck --strict
  assert_success
  n=$(git --git-dir "$gd" rev-list --objects esbx/head --not esbx/head~1 | wc -l)
  run layer_objects r "$(top_layer r)"
  assert_success
  [ "${#lines[@]}" -eq "$n" ]
}

# Bytes read from FILE's descriptors by the traced command, from
# `strace -y` output in TRACE.
bytes_read() {
  awk -v f="$2" 'index($0, f ">") && /(read|pread64)\(/ {n = $NF; if (n ~ /^[0-9]+$/) s += n}
    END {print s + 0}' "$1"
}

@test "session create and publish read a layer's commit from the end of its record" {
  command -v strace >/dev/null || skip "needs strace"
  make_repo 3000
  esbx_ok project create r --from-git "$REPO"
  l0=$(top_layer r)
  record=$ESBX_ROOT/projects/r/layers/$l0/record.json
  [ "$(stat -c %s "$record")" -gt 500000 ]
  run strace -f -y -e trace=read,pread64 -o "$BATS_TEST_TMPDIR/create.trace" "$ESBX" session create r --name s
  assert_success
  [ "$(bytes_read "$BATS_TEST_TMPDIR/create.trace" record.json)" -le 4096 ]
  m=$(path_of s)
  run git -C "$m" rev-parse HEAD
  assert_output "$(git -C "$REPO" rev-parse HEAD)"
  run git -C "$m" status --porcelain
  assert_output ""

  echo edited >>"$m/d1/e1/f11"
  run strace -f -y -e trace=read,pread64 -o "$BATS_TEST_TMPDIR/publish.trace" "$ESBX" publish s -m one
  assert_success
  [ "$(bytes_read "$BATS_TEST_TMPDIR/publish.trace" "$l0/record.json")" -le 4096 ]

  # A record that ends otherwise (its keys in another order) is parsed
  # whole: the same commit.
  jq -S . "$record" >"$record.new"
  mv "$record.new" "$record"
  [ "$(tail -c 200 "$record" | grep -c git_commit)" -eq 0 ]
  make_session r t --base "$l0"
  run git -C "$m" rev-parse HEAD
  assert_output "$(git -C "$REPO" rev-parse HEAD)"
  run git -C "$m" status --porcelain
  assert_output ""
}

# The fsyncs of `esbx session create PROJECT`.
create_fsyncs() {
  strace -f -e trace=fsync,fdatasync,syncfs -o "$BATS_TEST_TMPDIR/fsync.trace" "$ESBX" session create "$1" >/dev/null
  grep -cE '(fsync|fdatasync|syncfs)\(' "$BATS_TEST_TMPDIR/fsync.trace"
}

@test "a session of a git project costs one fsync more per file of its repository" {
  command -v strace >/dev/null || skip "needs strace"
  make_repo 20
  esbx_ok project create r --from-git "$REPO"
  esbx_ok project create plain --from "$REPO"
  plain=$(create_fsyncs plain)
  git=$(create_fsyncs r)
  # HEAD and the branch, each written and fsynced in the private temp
  # directory like session.json: no temp file, rename and directory fsync.
  [ "$git" -eq $((plain + 2)) ]
  make_session r s
  run git -C "$m" symbolic-ref HEAD
  assert_output refs/heads/s
  run git -C "$m" rev-parse HEAD
  assert_output "$(git -C "$REPO" rev-parse HEAD)"
  run git -C "$m" status --porcelain
  assert_output ""
}
