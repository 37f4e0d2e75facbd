#!/usr/bin/env bats
# What a layer of a git project costs: its pack holds the objects it adds
# (not the whole tree again).  The git command is the oracle.

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
