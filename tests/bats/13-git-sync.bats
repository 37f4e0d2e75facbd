#!/usr/bin/env bats
# Git projects and other repositories: push-git (the layers' commits to a
# remote, fast-forward only, credentials from a secret), pull-git (new
# commits of a ref as layers through the conflict gate), and both through
# the gateway.  The git command is the oracle; remotes are bare
# repositories on disk and git http-backend on 127.0.0.1 (git_http.py).

load gateway_helpers
bats_require_minimum_version 1.5.0

GIT=(git -c user.name=Tester -c user.email=tester@example.org -c init.defaultBranch=master
  -c protocol.file.allow=always)

# REPO a work tree, UP a bare clone of it (the project's source), BARE an
# empty bare repository (push-git's remote).
setup() {
  setup_store
  REPO=$BATS_TEST_TMPDIR/repo UP=$BATS_TEST_TMPDIR/srv/up.git BARE=$BATS_TEST_TMPDIR/srv/bare.git
  mkdir -p "$REPO/src" "$BATS_TEST_TMPDIR/srv"
  "${GIT[@]}" -C "$REPO" init -q
  seq 1 30 | sed 's/^/line /' >"$REPO/src/notes.txt"
  printf 'one\n' >"$REPO/f1"
  printf 'two\n' >"$REPO/f2"
  ln -s f1 "$REPO/link"
  "${GIT[@]}" -C "$REPO" add -A
  "${GIT[@]}" -C "$REPO" commit -qm first
  "${GIT[@]}" clone -q --bare "$REPO" "$UP"
  git init -q --bare "$BARE"
  HTTP_PID=
}

teardown() {
  [ -n "${HTTP_PID:-}" ] && kill "$HTTP_PID" 2>/dev/null
  teardown_gateway
}

# git http-backend serving $BATS_TEST_TMPDIR/srv on 127.0.0.1:$HTTP_PORT,
# with basic authentication when given USER:PASSWORD.
start_http() {
  local portfile=$BATS_TEST_TMPDIR/http.port
  rm -f "$portfile"
  python3 "$BATS_TEST_DIRNAME/git_http.py" "$BATS_TEST_TMPDIR/srv" "$portfile" "$@" \
    2>"$BATS_TEST_TMPDIR/http.log" &
  HTTP_PID=$!
  for _ in $(seq 50); do [ -s "$portfile" ] && break; sleep 0.1; done
  HTTP_PORT=$(cat "$portfile")
  [ -n "$HTTP_PORT" ]
}

# A commit pushed by hand to UP's master: `upstream MESSAGE CMD...` runs
# CMD in a clone of UP, commits everything, pushes.
upstream() {
  local msg=$1 wc=$BATS_TEST_TMPDIR/wc
  shift
  rm -rf "$wc"
  "${GIT[@]}" clone -q "$UP" "$wc"
  (cd "$wc" && "$@")
  "${GIT[@]}" -C "$wc" add -A
  "${GIT[@]}" -C "$wc" -c user.name=Upstream commit -qm "$msg"
  "${GIT[@]}" -C "$wc" push -q origin HEAD:master
}

# The git commits of PROJECT's layers, newest first (esbx project log).
layer_commits() { "$ESBX" --json project log "$1" | jq -r '.[].git_commit'; }

# What a tree holds, for comparisons: type, mode, link target, path.
listing() { (cd "$1" && find . -path ./.git -prune -o -printf '%y %m %l %p\n' | sort); }

# Export PROJECT into DIR.
export_to() {
  esbx_ok export "$1" -o "$BATS_TEST_TMPDIR/$1.tar"
  rm -rf "$2" && mkdir -p "$2"
  tar -xf "$BATS_TEST_TMPDIR/$1.tar" -C "$2"
}

# Objects in a repository, loose and packed.
objects() { git -C "$1" count-objects -v | awk '$1 == "count:" || $1 == "in-pack:" {n += $2} END {print n}'; }

@test "push-git to a bare repository: a clone of it is the export, one commit per layer" {
  esbx_ok project create r --from-git "$UP"
  make_sessions r a b
  echo a >>"$(path_of a)/f1"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "a: f1"
  echo b >>"$(path_of b)/f2"
  esbx_ok publish a
  esbx_ok publish b -m "b: f2"
  esbx_ok project push-git r "$BARE"
  assert_output --partial "pushed 3 layers to $BARE refs/heads/esbx"
  "${GIT[@]}" clone -q -b esbx "$BARE" "$BATS_TEST_TMPDIR/c"
  export_to r "$BATS_TEST_TMPDIR/x"
  diff <(listing "$BATS_TEST_TMPDIR/c") <(listing "$BATS_TEST_TMPDIR/x")
  diff -r --no-dereference -x .git "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/x"
  # esbx project log and git log: one to one, the same commits.
  diff <(layer_commits r) <(git -C "$BARE" log --format=%H esbx)
  run git -C "$BARE" log --format=%s esbx
  assert_output "$(printf 'b: f2\na: f1\nfirst')"
  git -C "$BARE" fsck --strict
  # The project remembers what went where.
  run jq -r '.pushed[0] | "\(.remote) \(.ref) \(.commit)"' "$ESBX_ROOT/projects/r/git.json"
  assert_output "$BARE refs/heads/esbx $(git -C "$BARE" rev-parse esbx)"
  # --branch names another branch.
  esbx_ok project push-git r "$BARE" --branch review/agents
  [ "$(git -C "$BARE" rev-parse review/agents)" = "$(git -C "$BARE" rev-parse esbx)" ]
  esbx_fails 2 project push-git r "$BARE" --branch 'bad..name'
  assert_output --partial "no branch name"
}

@test "a second push-git carries only the commits of the new layers" {
  esbx_ok project create r --from-git "$UP"
  esbx_ok project push-git r "$BARE"
  local before
  before=$(objects "$BARE")
  make_session r a
  echo a >>"$m/f1"
  esbx_ok publish a -m "a: f1"
  esbx_ok project push-git r "$BARE"
  assert_output --partial "pushed 1 layer to"
  # The new commit, its root tree and the blob of f1: nothing else.
  [ "$(($(objects "$BARE") - before))" = 3 ]
  [ "$(git -C "$BARE" rev-parse esbx)" = "$(layer_commits r | head -1)" ]
  [ "$(git -C "$BARE" rev-parse esbx~1)" = "$(git -C "$UP" rev-parse master)" ]
  esbx_ok project push-git r "$BARE"
  assert_output --partial "up to date: $BARE refs/heads/esbx"
  [ "$(objects "$BARE")" = "$((before + 3))" ]
}

@test "push-git refuses a non-fast-forward remote, naming both commits, and pushes nothing" {
  esbx_ok project create r --from-git "$UP"
  esbx_ok project push-git r "$BARE"
  # Someone else pushes to the branch.
  "${GIT[@]}" clone -q -b esbx "$BARE" "$BATS_TEST_TMPDIR/other"
  echo theirs >"$BATS_TEST_TMPDIR/other/theirs"
  "${GIT[@]}" -C "$BATS_TEST_TMPDIR/other" add -A
  "${GIT[@]}" -C "$BATS_TEST_TMPDIR/other" commit -qm theirs
  "${GIT[@]}" -C "$BATS_TEST_TMPDIR/other" push -q origin esbx
  local theirs
  theirs=$(git -C "$BARE" rev-parse esbx)
  make_session r a
  echo a >>"$m/f1"
  esbx_ok publish a
  esbx_fails 3 project push-git r "$BARE"
  [ "${#lines[@]}" = 1 ]
  assert_output --partial "has refs/heads/esbx at $theirs"
  assert_output --partial "head commit $(layer_commits r | head -1)"
  assert_output --partial "not a fast-forward"
  [ "$(git -C "$BARE" rev-parse esbx)" = "$theirs" ]
  [ "$(jq -r '.pushed[0].commit' "$ESBX_ROOT/projects/r/git.json")" = "$(git -C "$UP" rev-parse master)" ]
}

@test "push-git over HTTP: credentials from a secret, never in a URL, an argument or a log" {
  start_http tester:s3cret-of-the-test
  local url=http://127.0.0.1:$HTTP_PORT/bare.git
  esbx_ok project create r --from-git "$UP"
  esbx_ok project create other --from-git "$UP"
  printf 'tester:wrong-password' | "$ESBX" secret create bad
  printf 'tester:s3cret-of-the-test' | "$ESBX" secret create creds
  printf 'tester:s3cret-of-the-test' | "$ESBX" secret create others --project other
  esbx_fails 1 project push-git r "$url"
  assert_output --partial "asks for credentials"
  esbx_fails 1 project push-git r "$url" --secret bad
  assert_output --partial "refused the credentials of secret \`bad\`"
  esbx_fails 1 project push-git r "$url" --secret others
  assert_output --partial "belongs to project \`other\`"
  esbx_fails 2 project push-git r "http://tester:s3cret-of-the-test@127.0.0.1:$HTTP_PORT/bare.git"
  assert_output --partial "holds a password"
  refute_output --partial "s3cret-of-the-test"
  ! git -C "$BARE" rev-parse -q --verify esbx
  esbx_ok project push-git r "$url" --secret creds
  assert_output --partial "pushed 1 layer to $url"
  [ "$(git -C "$BARE" rev-parse esbx)" = "$(git -C "$UP" rev-parse master)" ]
  grep -q "POST /bare.git/git-receive-pack" "$BATS_TEST_TMPDIR/http.log"
  # The value is nowhere but in the secret.
  run grep -rl "s3cret-of-the-test" "$ESBX_ROOT" --exclude-dir=secrets
  assert_output ""
  ! grep -q "s3cret-of-the-test" "$BATS_TEST_TMPDIR/http.log"
}

@test "pull-git: a commit pushed by hand lands as a layer; stale sessions conflict at publish and merge on rebase" {
  esbx_ok project create r --from-git "$UP"
  make_sessions r a b c
  sed -i 's/^line 28$/line 28 by a/' "$(path_of a)/src/notes.txt"
  "${GIT[@]}" -C "$(path_of a)" commit -qam "a: line 28"
  sed -i 's/^line 2$/line 2 by b/' "$(path_of b)/src/notes.txt"
  echo c >>"$(path_of c)/f2"
  upstream "upstream: line 2" sed -i 's/^line 2$/line 2 upstream/' src/notes.txt
  local commit
  commit=$(git -C "$UP" rev-parse master)
  esbx_ok project pull-git r
  assert_line --index 0 --regexp "^[0-9a-f]{16} $commit\$"
  assert_output --partial "pulled 1 commit of $UP HEAD"
  run "$ESBX" --json project log r
  [ "$(jq -r '.[0].git_commit' <<<"$output")" = "$commit" ]
  [ "$(jq -r '.[0].message' <<<"$output")" = "upstream: line 2" ]
  [ "$(jq -r '.[0].changes' <<<"$output")" = 1 ]
  esbx_ok project pull-git r
  assert_output --partial "up to date"
  # A new session is at the commit, its repository clean.
  make_session r n
  grep -qx 'line 2 upstream' "$m/src/notes.txt"
  run git -C "$m" status --porcelain
  assert_output ""
  [ "$(git -C "$m" rev-parse HEAD)" = "$commit" ]
  # Another path: no conflict.
  esbx_ok publish c
  # The same file, another hunk: exit 3, then rebase merges it.
  esbx_fails 3 publish a
  assert_output --partial "/src/notes.txt"
  esbx_ok rebase a
  assert_output --partial "merged: /src/notes.txt"
  esbx_ok publish a
  # The same line: exit 3, and rebase leaves it for a person.
  esbx_fails 3 publish b
  esbx_fails 4 rebase b
  grep -q '^<<<<<<< ' "$(path_of b)/src/notes.txt"
  # The project's repository: the pulled commit under the two published.
  rm -rf "$BATS_TEST_TMPDIR/h"
  "${GIT[@]}" clone -q -b esbx/head "$("$ESBX" project git-dir r)" "$BATS_TEST_TMPDIR/h"
  run git -C "$BATS_TEST_TMPDIR/h" log --format=%s
  assert_line --index 0 "a: line 28"
  assert_line --index 2 "upstream: line 2"
  git -C "$BATS_TEST_TMPDIR/h" fsck --strict
  grep -qx 'line 2 upstream' "$BATS_TEST_TMPDIR/h/src/notes.txt"
  grep -qx 'line 28 by a' "$BATS_TEST_TMPDIR/h/src/notes.txt"
}

@test "pull-git: each first-parent commit one layer, a merge one layer with the side it joins" {
  esbx_ok project create r --from-git "$UP"
  local wc=$BATS_TEST_TMPDIR/wc2
  "${GIT[@]}" clone -q "$UP" "$wc"
  "${GIT[@]}" -C "$wc" checkout -qb feature
  mkdir -p "$wc/feat"
  echo f1 >"$wc/feat/one"
  "${GIT[@]}" -C "$wc" add -A && "${GIT[@]}" -C "$wc" commit -qm "feature 1"
  echo f2 >"$wc/feat/two"
  chmod +x "$wc/feat/two"
  "${GIT[@]}" -C "$wc" add -A && "${GIT[@]}" -C "$wc" commit -qm "feature 2"
  "${GIT[@]}" -C "$wc" checkout -q master
  "${GIT[@]}" -C "$wc" rm -q f2
  "${GIT[@]}" -C "$wc" mv src lib
  "${GIT[@]}" -C "$wc" commit -qm "main: rm f2, src to lib"
  "${GIT[@]}" -C "$wc" merge -q --no-ff -m "merge feature" feature
  "${GIT[@]}" -C "$wc" push -q origin master
  esbx_ok project pull-git r
  [ "${#lines[@]}" = 3 ]
  run "$ESBX" --json project log r
  [ "$(jq -r '.[0].message' <<<"$output")" = "merge feature" ]
  [ "$(jq -r '.[1].message' <<<"$output")" = "main: rm f2, src to lib" ]
  [ "$(jq length <<<"$output")" = 3 ]
  diff <(layer_commits r) <(git -C "$UP" log --first-parent --format=%H master)
  # The merge's layer is its first-parent diff: feat/ and nothing else.
  run jq -r '.changes[].path' "$ESBX_ROOT/projects/r/layers/$(jq -r '.[0].id' <<<"$output")/record.json"
  assert_output "$(printf '/feat\n/feat/one\n/feat/two')"
  # The head is upstream's tree, and its repository has the feature's commits.
  export_to r "$BATS_TEST_TMPDIR/x"
  mkdir "$BATS_TEST_TMPDIR/a"
  git -C "$UP" -c tar.umask=022 archive master | tar -x -C "$BATS_TEST_TMPDIR/a"
  diff <(listing "$BATS_TEST_TMPDIR/a") <(listing "$BATS_TEST_TMPDIR/x")
  diff -r --no-dereference "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/x"
  make_session r n
  run git -C "$m" status --porcelain
  assert_output ""
  run git -C "$m" log --format=%s
  assert_line "feature 1"
  git -C "$m" fsck --strict
}

@test "pull-git refuses rewritten history and a diverged project; an ahead project is up to date" {
  esbx_ok project create r --from-git "$UP"
  upstream "upstream 1" sh -c 'echo 1 >u1'
  esbx_ok project pull-git r
  local before
  before=$("$ESBX" project log r)
  # Upstream rewrites the commit the project holds.
  local wc=$BATS_TEST_TMPDIR/wc
  "${GIT[@]}" -C "$wc" commit -q --amend -m "upstream 1, amended"
  "${GIT[@]}" -C "$wc" push -q -f origin HEAD:master
  esbx_fails 3 project pull-git r
  [ "${#lines[@]}" = 1 ]
  assert_output --partial "at $(git -C "$UP" rev-parse master), which does not descend from the project's head commit $(layer_commits r | head -1)"
  assert_output --partial "nothing pulled"
  assert_equal "$("$ESBX" project log r)" "$before"
  # Another ref, with --ref: a branch that is behind the head is up to date.
  git -C "$UP" branch old "$(git -C "$REPO" rev-parse master)"
  esbx_ok project pull-git r --ref old
  assert_output --partial "up to date"
  esbx_fails 1 project pull-git r --ref nosuch
  assert_output --partial "has no ref \`nosuch\`"
  esbx_fails 2 project pull-git r "$UP" extra
  esbx_ok project create plain
  esbx_fails 2 project pull-git plain
  assert_output --partial "not made from a git repository"
}

# A commit on UP's master, its parent the current one, adding the entry
# MODE NAME (escapes allowed) to the root (WHERE "/") or to src/.
hostile_push() {
  python3 - "$UP" "$1" "$2" "$3" <<'PY'
import subprocess, sys
repo, mode, where = sys.argv[1], sys.argv[2].encode(), sys.argv[4]
name = sys.argv[3].encode().decode('unicode_escape').encode()
def git(*args, data=None):
    return subprocess.run(['git', '-C', repo, *args], input=data, capture_output=True,
                          check=True).stdout
def obj(kind, data):
    return git('hash-object', '-t', kind, '--literally', '-w', '--stdin', data=data).strip().decode()
def entries(tree):
    out = []
    for line in git('ls-tree', '-z', tree).split(b'\0'):
        if line:
            meta, n = line.split(b'\t', 1)
            m, _, oid = meta.split(b' ')
            out.append((m.lstrip(b'0'), n, oid.decode()))
    return out
def tree(ents):
    ents = sorted(ents, key=lambda e: e[1] + (b'/' if e[0] == b'40000' else b''))
    return obj('tree', b''.join(m + b' ' + n + b'\0' + bytes.fromhex(o) for m, n, o in ents))
target = obj('tree', b'') if mode == b'40000' else '1' * 40 if mode == b'160000' else obj('blob', b'x')
master = git('rev-parse', 'master').strip().decode()
root = entries(master + '^{tree}')
if where == '/':
    root.append((mode, name, target))
else:
    src = [e for e in root if e[1] == b'src'][0]
    root = [e for e in root if e[1] != b'src']
    root.append((b'40000', b'src', tree(entries(src[2]) + [(mode, name, target)])))
commit = obj('commit', f'tree {tree(root)}\nparent {master}\nauthor A <a@b> 0 +0000\n'
             f'committer A <a@b> 0 +0000\n\nhostile\n'.encode())
git('update-ref', 'refs/heads/master', commit)
PY
}

@test "pull-git: hostile commits are refused in one line and land nothing; a gitlink is an empty directory" {
  esbx_ok project create r --from-git "$UP"
  local before master spec
  before=$("$ESBX" project log r)
  master=$(git -C "$UP" rev-parse master)
  for spec in "40000 .git /" "40000 .. src" "120000 .git src" "100644 .GIT /" "100644 a\\nb src" \
    "100644 a/b /"; do
    git -C "$UP" update-ref refs/heads/master "$master"
    read -r mode name where <<<"$spec"
    hostile_push "$mode" "$name" "$where"
    esbx_fails 1 project pull-git r
    [ "${#lines[@]}" = 1 ]
    assert_equal "$("$ESBX" project log r)" "$before"
  done
  run ls -A "$ESBX_ROOT/projects/r/tmp"
  assert_output ""
  # A symlink out of the tree, then a directory of that name: written in
  # the layer, never through the link.
  git -C "$UP" update-ref refs/heads/master "$master"
  mkdir "$BATS_TEST_TMPDIR/outside"
  upstream "a link out" ln -s "$BATS_TEST_TMPDIR/outside" evil
  esbx_ok project pull-git r
  upstream "a directory there" sh -c 'rm evil && mkdir evil && echo x >evil/x'
  esbx_ok project pull-git r
  run ls -A "$BATS_TEST_TMPDIR/outside"
  assert_output ""
  # A submodule: an empty directory, and the index has it.
  hostile_push 160000 sub /
  esbx_ok project pull-git r
  assert_output --partial "\`/sub\` is a submodule"
  make_session r s
  [ "$(cat "$m/evil/x")" = x ]
  run ls -A "$m/sub"
  assert_output ""
  run git -C "$m" status --porcelain
  assert_output ""
  [ "$(git -C "$m" ls-files -s sub | cut -c1-6)" = 160000 ]
}

@test "pull-git and project create over HTTP (git http-backend, anonymous)" {
  start_http
  local url=http://127.0.0.1:$HTTP_PORT/up.git
  esbx_ok project create h --from-git "$url"
  upstream "over http" sh -c 'echo h >h'
  esbx_ok project pull-git h
  assert_output --partial "pulled 1 commit of $url HEAD"
  [ "$(layer_commits h | head -1)" = "$(git -C "$UP" rev-parse master)" ]
  grep -q "POST /up.git/git-upload-pack" "$BATS_TEST_TMPDIR/http.log"
  # From another repository, named: the recorded source is not changed.
  esbx_ok project pull-git h "$UP"
  assert_output --partial "up to date"
  [ "$(jq -r .source "$ESBX_ROOT/projects/h/git.json")" = "$url" ]
}

@test "gateway: push-git and pull-git with scoped tokens; the session's branch in inspect" {
  setup_gateway
  start_http
  local url=http://127.0.0.1:$HTTP_PORT/bare.git
  esbx_ok project create r --from-git "$UP"
  esbx_ok project create o --from-git "$UP"
  printf 'tester:pw' | "$ESBX" secret create store-wide
  printf 'tester:pw' | "$ESBX" secret create r-own --project r
  local mine others observe
  mine=$(token manage,observe --project r)
  others=$(token manage --project o)
  observe=$(token observe)
  gw_expect 403 POST /v1/projects/r/push-git "$observe" "{\"remote\":\"$url\"}"
  gw_expect 403 POST /v1/projects/r/push-git "$others" "{\"remote\":\"$url\"}"
  gw_expect 403 POST /v1/projects/r/pull-git "$others" '{}'
  # Host paths are not offered: a local path, file://.
  gw_expect 403 POST /v1/projects/r/push-git "$mine" "{\"remote\":\"$BARE\"}"
  assert_output --partial "a path of the daemon's host"
  gw_expect 403 POST /v1/projects/r/push-git "$mine" "{\"remote\":\"file://$BARE\"}"
  gw_expect 403 POST /v1/projects/r/pull-git "$mine" "{\"remote\":\"$UP\"}"
  # A limited token names its project's secrets only.
  gw_expect 403 POST /v1/projects/r/push-git "$mine" "{\"remote\":\"$url\",\"secret\":\"store-wide\"}"
  gw_expect 400 POST /v1/projects/r/push-git "$mine" "{\"remote\":\"$url\",\"ref\":\"x\"}"
  ! git -C "$BARE" rev-parse -q --verify esbx
  gw_expect 200 POST /v1/projects/r/push-git "$mine" "{\"remote\":\"$url\",\"secret\":\"r-own\"}"
  [ "$(json_field commit <<<"$output")" = "$(git -C "$BARE" rev-parse esbx)" ]
  [ "$(json_field layers <<<"$output")" = 1 ]
  # pull-git with no remote: the source the host recorded (a path).
  upstream "upstream 1" sh -c 'echo 1 >u1'
  gw_expect 200 POST /v1/projects/r/pull-git "$mine" '{}'
  [ "$(json_field layers.0.commit <<<"$output")" = "$(git -C "$UP" rev-parse master)" ]
  # The remote CLI sends the same requests.
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$mine" "$ESBX" project push-git r "$url"
  assert_success
  assert_output --partial "pushed 1 layer to $url refs/heads/esbx"
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$mine" "$ESBX" project pull-git r "http://127.0.0.1:$HTTP_PORT/up.git"
  assert_success
  assert_output --partial "up to date"
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$others" "$ESBX" project push-git r "$url"
  assert_failure 1
  # A git session's branch and HEAD in session inspect.
  make_session r s
  echo s >>"$m/f1"
  "${GIT[@]}" -C "$m" commit -qam "s: f1"
  gw_expect 200 GET /v1/sessions/s "$mine"
  [ "$(json_field git.branch <<<"$output")" = s ]
  [ "$(json_field git.commit <<<"$output")" = "$(git -C "$m" rev-parse HEAD)" ]
  [ "$(json_field git.base_commit <<<"$output")" = "$(git -C "$UP" rev-parse master)" ]
  grep -q '"path":"/v1/projects/r/push-git","decision":"allowed","status":200' "$ESBX_ROOT/audit.log"
}
