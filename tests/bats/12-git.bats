#!/usr/bin/env bats
# Git projects: layer 0 from a repository's commit, a real repository in
# every session, publish makes a commit, rebase moves the branch, hostile
# repositories refused.  The git command is the oracle.

load helpers
bats_require_minimum_version 1.5.0

GIT=(git -c user.name=Tester -c user.email=tester@example.org -c init.defaultBranch=master
  -c protocol.file.allow=always)

setup() {
  setup_store
  REPO=$BATS_TEST_TMPDIR/repo
  mkdir -p "$REPO"
  "${GIT[@]}" -C "$REPO" init -q
  mkdir -p "$REPO/src" "$REPO/bin"
  seq 1 30 | sed 's/^/line /' >"$REPO/src/notes.txt"
  printf 'one\n' >"$REPO/f1"
  printf 'two\n' >"$REPO/f2"
  printf '#!/bin/sh\necho hi\n' >"$REPO/bin/run"
  chmod +x "$REPO/bin/run"
  ln -s f1 "$REPO/link"
  "${GIT[@]}" -C "$REPO" add -A
  "${GIT[@]}" -C "$REPO" commit -qm "first"
  echo more >>"$REPO/f1"
  "${GIT[@]}" -C "$REPO" commit -qam "second"
}

# The store's repository of project P, cloned into DIR at esbx/head.
clone_head() {
  rm -rf "$2"
  "${GIT[@]}" clone -q -b esbx/head "$("$ESBX" project git-dir "$1")" "$2"
}

# What a tree is, for comparisons: type, mode, link target, path.
listing() { (cd "$1" && find . -path ./.git -prune -o -printf '%y %m %l %p\n' | sort); }

@test "--from-git: layer 0 is git archive of the ref, byte for byte (this project's repository)" {
  [ -d "$ESBX_SRC/.git" ] || skip "the sources are not a git checkout"
  esbx_ok project create self --from-git "$ESBX_SRC"
  esbx_ok export self -o "$BATS_TEST_TMPDIR/layer.tar"
  mkdir "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  git -C "$ESBX_SRC" -c tar.umask=022 archive HEAD | tar -x -C "$BATS_TEST_TMPDIR/a"
  tar -xf "$BATS_TEST_TMPDIR/layer.tar" -C "$BATS_TEST_TMPDIR/b"
  diff <(listing "$BATS_TEST_TMPDIR/a") <(listing "$BATS_TEST_TMPDIR/b")
  diff -r --no-dereference "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  # The layer record names the commit.
  run jq -r .git_commit "$ESBX_ROOT"/projects/self/layers/*/record.json
  assert_output "$(git -C "$ESBX_SRC" rev-parse HEAD)"
}

@test "--from-git --ref: an older commit; the session's repository has its history" {
  esbx_ok project create r --from-git "$REPO" --ref HEAD~1
  make_session r s
  run cat "$m/f1"
  assert_output one
  [ "$(stat -c %a "$m/bin/run")" = 755 ]
  [ "$(readlink "$m/link")" = f1 ]
  run git -C "$m" status --porcelain
  assert_success
  assert_output ""
  run git -C "$m" rev-parse --abbrev-ref HEAD
  assert_output s
  run git -C "$m" log --format=%s
  assert_output first
  # .git is no change, and not in a diff.
  esbx_ok diff s
  assert_output ""
}

@test "two sessions commit disjoint files: both land as commits, fsck is clean" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a b
  echo a >>"$(path_of a)/f1"
  "${GIT[@]}" -C "$(path_of a)" -c user.name=Alice -c user.email=alice@example.org commit -qam "alice: f1"
  echo b >>"$(path_of b)/f2"
  "${GIT[@]}" -C "$(path_of b)" -c user.name=Bob -c user.email=bob@example.org commit -qam "bob: f2"
  esbx_ok diff a
  assert_output "M /f1"
  esbx_ok publish a
  local la=$output
  esbx_ok publish b
  local lb=$output
  clone_head r "$BATS_TEST_TMPDIR/c"
  run git -C "$BATS_TEST_TMPDIR/c" log --format='%an %s'
  assert_line --index 0 "Bob bob: f2"
  assert_line --index 1 "Alice alice: f1"
  assert_line --index 2 "Tester second"
  run git -C "$BATS_TEST_TMPDIR/c" log -1 --format=%B
  assert_line "Esbx-Layer: $lb"
  assert_line "Esbx-Session: b"
  git -C "$BATS_TEST_TMPDIR/c" log -1 --skip=1 --format=%B | grep -qx "Esbx-Layer: $la"
  git -C "$BATS_TEST_TMPDIR/c" fsck --strict
  run cat "$BATS_TEST_TMPDIR/c/f1" "$BATS_TEST_TMPDIR/c/f2"
  assert_output "$(printf 'one\nmore\na\ntwo\nb')"
  # The head exported equals the commit's tree.
  esbx_ok export r -o "$BATS_TEST_TMPDIR/head.tar"
  mkdir "$BATS_TEST_TMPDIR/h"
  tar -xf "$BATS_TEST_TMPDIR/head.tar" -C "$BATS_TEST_TMPDIR/h"
  diff -r --no-dereference -x .git "$BATS_TEST_TMPDIR/h" "$BATS_TEST_TMPDIR/c"
}

@test "a snapshot of a git session leaves its repository where git reads it" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a
  echo a >>"$(path_of a)/f1"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "before"
  esbx_ok session snapshot a --name sn
  esbx_ok --json session inspect a
  echo "$output" | jq -e '.git.branch == "a" and .git.commit != null'
  echo b >>"$(path_of a)/f2"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "after"
  esbx_ok publish a
  clone_head r "$BATS_TEST_TMPDIR/c"
  run git -C "$BATS_TEST_TMPDIR/c" log -1 --format=%B
  assert_line "before"
  assert_line "after"
  esbx_ok discard --force a
  esbx_ok gc --snapshots
}

@test "a fork of a git session is on a branch of its own at its parent's commit" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a
  echo a >>"$(path_of a)/f1"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "in a"
  parent=$(git -C "$(path_of a)" rev-parse HEAD)
  esbx_ok session fork a --name f
  run git -C "$(path_of f)" symbolic-ref --short HEAD
  assert_output f
  [ "$(git -C "$(path_of f)" rev-parse HEAD)" = "$parent" ]
  git -C "$(path_of f)" status --porcelain | grep -q . && fail "the fork's tree is not clean"
  # inspect reads the repository through the fork's layers, before and
  # after git writes in it.
  esbx_ok --json session inspect f
  echo "$output" | jq -e --arg c "$parent" '.git.branch == "f" and .git.commit == $c'
  echo f >>"$(path_of f)/f2"
  "${GIT[@]}" -C "$(path_of f)" commit -qam "in f"
  esbx_ok --json session inspect f
  echo "$output" | jq -e --arg c "$(git -C "$(path_of f)" rev-parse HEAD)" \
    '.git.branch == "f" and .git.commit == $c'
  # The parent stays where it was.
  esbx_ok --json session inspect a
  echo "$output" | jq -e --arg c "$parent" '.git.branch == "a" and .git.commit == $c'
  esbx_ok publish f
  clone_head r "$BATS_TEST_TMPDIR/c"
  run git -C "$BATS_TEST_TMPDIR/c" log -1 --format=%B
  assert_line "in a"
  assert_line "in f"
  esbx_ok discard --force f
  esbx_ok discard --force a
  esbx_ok gc --snapshots
}

@test "a fork's repository is read through its frozen layers without following a symlink out of the session" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a b
  parent=$(git -C "$(path_of a)" rev-parse HEAD)
  # A host directory that looks like a repository on branch `leak`.
  out=$BATS_TEST_TMPDIR/outside
  leak=0123456789abcdef0123456789abcdef01234567
  mkdir -p "$out/refs/heads"
  printf 'ref: refs/heads/leak\n' >"$out/HEAD"
  echo "$leak" >"$out/refs/heads/leak"
  echo "$leak" >"$out/refs/heads/a"
  (cd "$out" && find . -type f -exec sha256sum {} + | sort) >"$BATS_TEST_TMPDIR/out.sum"
  # In a: its branch's ref is a symlink out of the session (absolute and
  # relative).  In b: `.git` itself is one.
  g=$(path_of a)/.git
  rm "$g/refs/heads/a"
  ln -s "$out/refs/heads/a" "$g/refs/heads/a"
  ln -s ../../../../../../../../../../..$out/refs/heads/leak "$g/refs/heads/rel"
  mv "$(path_of b)/.git" "$BATS_TEST_TMPDIR/b.git"
  ln -s "$out" "$(path_of b)/.git"
  # Frozen into the forks' layers, read from there by inspect.
  esbx_ok session fork a --name fa
  esbx_ok session fork b --name fb
  for s in a fa b fb; do
    esbx_ok --json session inspect "$s"
    echo "$output" | jq -e --arg l "$leak" '(.git.commit // "") != $l and (.git.branch // "") != "leak"'
  done
  # A rebase copies the frozen layers into the fork's upper: links stay
  # links, nothing is written through them.
  make_sessions r u
  echo upstream >>"$(path_of u)/f2"
  "${GIT[@]}" -C "$(path_of u)" commit -qam upstream
  esbx_ok publish u
  for s in fa fb; do
    run "$ESBX" rebase "$s"
    [ "$status" -le 3 ] || fail "rebase $s: status $status: $output"
  done
  # The rebase moved fa's branch: its ref is a file of the session now,
  # put in place of the link; the other link was copied as a link.
  [ -f "$(path_of fa)/.git/refs/heads/a" ] && [ ! -L "$(path_of fa)/.git/refs/heads/a" ]
  [ "$(readlink "$(path_of fa)/.git/refs/heads/rel")" = "../../../../../../../../../../..$out/refs/heads/leak" ]
  [ "$(readlink "$(path_of fb)/.git")" = "$out" ]
  (cd "$out" && find . -type f -exec sha256sum {} + | sort) | diff - "$BATS_TEST_TMPDIR/out.sum"
  [ "$(find "$out" | wc -l)" = 6 ] || { find "$out" >&3; false; }
  for s in fa fb; do
    esbx_ok --json session inspect "$s"
    echo "$output" | jq -e --arg l "$leak" '(.git.commit // "") != $l and (.git.branch // "") != "leak"'
  done
  [ "$parent" != "$leak" ]
  for s in fa fb a b; do esbx_ok discard --force "$s"; done
  esbx_ok gc --snapshots
}

@test "one file changed in different hunks: rebase merges, the session's commit sits on the head" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a b
  sed -i 's/^line 2$/line 2 by a/' "$(path_of a)/src/notes.txt"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "a: line 2"
  sed -i 's/^line 28$/line 28 by b/' "$(path_of b)/src/notes.txt"
  "${GIT[@]}" -C "$(path_of b)" -c user.name=Bob -c user.email=bob@example.org commit -qam "b: line 28"
  esbx_ok publish a
  esbx_fails 3 publish b
  esbx_ok rebase b
  assert_output --partial "merged: /src/notes.txt"
  run git -C "$(path_of b)" status --porcelain
  assert_output ""
  run git -C "$(path_of b)" log --format='%an %s'
  assert_line --index 0 "Bob b: line 28"
  assert_line --index 1 "Tester a: line 2"
  grep -qx 'line 2 by a' "$(path_of b)/src/notes.txt"
  esbx_ok publish b
  clone_head r "$BATS_TEST_TMPDIR/c"
  run git -C "$BATS_TEST_TMPDIR/c" log --format='%an %s'
  assert_line --index 0 "Bob b: line 28"
  git -C "$BATS_TEST_TMPDIR/c" fsck --strict
}

@test "uncommitted work after a rebase shows as changes; -m and the agent label name a publish" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a
  make_session r b --label agent=robot
  echo a >>"$(path_of a)/f1"
  esbx_ok publish a
  echo b >>"$(path_of b)/f2"
  esbx_ok rebase b
  run git -C "$(path_of b)" status --porcelain
  assert_output " M f2"
  esbx_ok publish b
  make_session r c
  echo c >"$(path_of c)/new"
  esbx_ok publish c -m "explicit message"
  clone_head r "$BATS_TEST_TMPDIR/c"
  run git -C "$BATS_TEST_TMPDIR/c" log --format='%an <%ae> %s'
  assert_line --index 0 "esbx <esbx@esbx.invalid> explicit message"
  assert_line --index 1 "robot <robot@esbx.invalid> esbx: publish of session b"
}

@test "git gc and repack in one session change nothing in another or in the layers" {
  esbx_ok project create r --from-git "$REPO"
  make_sessions r a b
  local before
  before=$(find "$ESBX_ROOT"/projects/r/layers -path '*/.git/*' -type f -exec sha256sum {} + | sort)
  "${GIT[@]}" -C "$(path_of a)" gc --aggressive -q
  "${GIT[@]}" -C "$(path_of a)" repack -adq
  "${GIT[@]}" -C "$(path_of a)" fsck --strict
  [ "$(find "$ESBX_ROOT"/projects/r/layers -path '*/.git/*' -type f -exec sha256sum {} + | sort)" = "$before" ]
  run git -C "$(path_of b)" log --format=%s
  assert_output "$(printf 'second\nfirst')"
  git -C "$(path_of b)" fsck --strict
  run git -C "$(path_of b)" status --porcelain
  assert_output ""
  # What git wrote is the session's own, and no change.
  esbx_ok diff a
  assert_output ""
}

@test "--from DIR holding a .git leaves it out with a warning" {
  esbx_ok project create plain --from "$REPO"
  assert_output --partial "are left out: a git repository makes a git project with"
  make_session plain s
  assert_file_not_exists "$m/.git"
  assert_file_exists "$m/f1"
}

@test "bad repositories and refs: one line naming the cause, nothing created" {
  esbx_fails 1 project create x --from-git "$BATS_TEST_TMPDIR/nosuch"
  assert_output --partial "is not a git repository"
  esbx_fails 1 project create x --from-git "$REPO" --ref nosuchref
  assert_output --partial "has no ref or commit \`nosuchref\`"
  esbx_fails 1 project create x --from-git "$REPO" --ref 'a..b'
  esbx_fails 1 project create x --from-git http://127.0.0.1:9/nothing.git
  assert_output --partial "fetch \`http://127.0.0.1:9/nothing.git\`"
  # A shallow clone does not hold the history.
  "${GIT[@]}" clone -q --depth 1 "file://$REPO" "$BATS_TEST_TMPDIR/shallow"
  esbx_fails 1 project create x --from-git "$BATS_TEST_TMPDIR/shallow"
  assert_output --partial "shallow repository"
  # A missing object.
  cp -a "$REPO" "$BATS_TEST_TMPDIR/broken"
  rm "$BATS_TEST_TMPDIR/broken/.git/objects/$(git -C "$REPO" rev-parse HEAD:f2 | cut -c1-2)/$(git -C "$REPO" rev-parse HEAD:f2 | cut -c3-)"
  esbx_fails 1 project create x --from-git "$BATS_TEST_TMPDIR/broken"
  [ "$(echo "$output" | wc -l)" -eq 1 ]
  esbx_fails 1 project log x
  assert_dir_not_exists "$ESBX_ROOT/projects/x"
}

# A commit of REPO whose root tree holds one entry, MODE NAME -> the blob
# of "x" (or, with MODE 040000, an empty tree), written raw: git's own
# commands refuse to make such trees.
hostile_commit() {
  python3 - "$REPO" "$1" "$2" <<'PY'
import subprocess, sys
repo, mode, name = sys.argv[1], sys.argv[2], sys.argv[3].encode().decode('unicode_escape').encode()
def obj(kind, data):
    return subprocess.run(['git', '-C', repo, 'hash-object', '-t', kind, '--literally', '-w', '--stdin'],
                          input=data, capture_output=True, check=True).stdout.strip().decode()
if mode == '40000':
    target = obj('tree', b'')
elif mode == '160000':
    target = '1' * 40
else:
    target = obj('blob', b'x')
tree = obj('tree', mode.encode() + b' ' + name + b'\0' + bytes.fromhex(target))
commit = obj('commit', f'tree {tree}\nauthor A <a@b> 0 +0000\ncommitter A <a@b> 0 +0000\n\nhostile\n'.encode())
print(commit)
PY
}

@test "hostile trees: .git, .., a symlink .git, a newline are refused; a gitlink is an empty directory" {
  local c name
  for spec in "40000 .git" "40000 .." "120000 .git" "100644 .GIT" "100644 a\\nb"; do
    c=$(hostile_commit "${spec%% *}" "${spec#* }")
    esbx_fails 1 project create h --from-git "$REPO" --ref "$c"
    [ "$(echo "$output" | wc -l)" -eq 1 ]
    assert_dir_not_exists "$ESBX_ROOT/projects/h"
  done
  c=$(hostile_commit 160000 sub)
  esbx_ok project create h --from-git "$REPO" --ref "$c"
  assert_output --partial "\`/sub\` is a submodule"
  make_session h s
  assert_dir_exists "$m/sub"
  run ls -A "$m/sub"
  assert_output ""
}

@test "a 1 GiB blob is imported as a file of its own" {
  head -c 1G /dev/zero >"$REPO/big"
  "${GIT[@]}" -C "$REPO" add big
  "${GIT[@]}" -C "$REPO" commit -qm big
  rm "$REPO/big"
  esbx_ok project create r --from-git "$REPO"
  make_session r s
  [ "$(stat -c %s "$m/big")" -eq 1073741824 ]
  run git -C "$m" status --porcelain
  assert_output ""
}

@test "a path git tracks is never dropped by an ignore rule; an untracked ignored one is named" {
  printf '*.cmake\nbuild/\n' >"$REPO/.gitignore"
  mkdir -p "$REPO/vendor/dep" "$REPO/build"
  echo 'set(a)' >"$REPO/vendor/dep/a.cmake"
  echo keep >"$REPO/build/keep.txt"
  "${GIT[@]}" -C "$REPO" add .gitignore
  "${GIT[@]}" -C "$REPO" add -f vendor/dep/a.cmake build/keep.txt
  "${GIT[@]}" -C "$REPO" commit -qm "vendored cmake"
  esbx_ok project create r --from-git "$REPO"
  make_session r s
  echo 'set(a2)' >>"$m/vendor/dep/a.cmake"
  echo more >>"$m/build/keep.txt"
  echo 'set(b)' >"$m/vendor/dep/b.cmake"
  echo 'set(c)' >"$m/vendor/dep/c.cmake"
  "${GIT[@]}" -C "$m" add -f vendor/dep/b.cmake
  echo obj >"$m/build/x.o"
  esbx_ok diff s
  assert_line "M /vendor/dep/a.cmake"
  assert_line "A /vendor/dep/b.cmake"
  assert_line "M /build/keep.txt"
  refute_line --partial "c.cmake"
  refute_line --partial "x.o"
  esbx_ok publish s
  assert_output --partial "2 ignored paths left out"
  assert_output --partial "/vendor/dep/c.cmake"
  clone_head r "$BATS_TEST_TMPDIR/c"
  grep -q 'set(a2)' "$BATS_TEST_TMPDIR/c/vendor/dep/a.cmake"
  assert_file_exists "$BATS_TEST_TMPDIR/c/vendor/dep/b.cmake"
  assert_file_not_exists "$BATS_TEST_TMPDIR/c/vendor/dep/c.cmake"
  grep -q more "$BATS_TEST_TMPDIR/c/build/keep.txt"
}
