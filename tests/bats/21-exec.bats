#!/usr/bin/env bats
# esbx exec, ps and events: shared state between commands, the seccomp
# filter and dropped privileges, exit statuses, the event log.

bats_require_minimum_version 1.5.0
# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

setup() { setup_session; }

@test "a detached process started by one exec is visible to the next" {
  esbx_ok exec --detach s1 -- sleep 300
  assert_output ""
  esbx_ok exec s1 -- ps -eo pid,args
  assert_output --regexp "[0-9]+ sleep 300"
  esbx_ok ps s1
  assert_line --regexp "^ +1 +[0-9]+ .*esbx-holder"
  assert_line --regexp "^ +[0-9]+ +[0-9]+ sleep 300$"
  esbx_ok --json ps s1
  assert_output --partial '"command": "sleep 300"'
}

@test "files written by one command are read by the next, and stay in the session" {
  esbx_ok session create p --name s2
  esbx_ok exec s1 -- sh -c 'echo state >/workspace/f && mkdir /workspace/d && cp /workspace/f /workspace/d/g'
  esbx_ok exec s1 -- cat /workspace/d/g
  assert_output "state"
  assert_file_not_exists /workspace/f
  run "$ESBX" exec s2 -- cat /workspace/f
  assert_failure
  assert_file_not_exists "$BATS_TEST_TMPDIR/src/f"
}

@test "mount, unshare and friends fail with EPERM" {
  run "$ESBX" exec s1 -- unshare -m true
  assert_failure
  assert_output --partial "Operation not permitted"
  run "$ESBX" exec s1 -- mount -t tmpfs x /tmp
  assert_failure
  assert_output --regexp "permission denied|Operation not permitted"
  run "$ESBX" exec s1 -- unshare -n true
  assert_failure
  assert_output --partial "Operation not permitted"
  esbx_ok exec s1 -- sh -c 'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status'
  assert_line --regexp "NoNewPrivs:[[:space:]]+1"
  assert_line --regexp "Seccomp:[[:space:]]+2"
  # CAP_SYS_ADMIN (21) and CAP_SYS_MODULE (16) are out of the bounding set.
  esbx_ok exec s1 -- sh -c 'awk "/^CapBnd/ {print \$2}" /proc/self/status'
  bnd=$((16#$output))
  [ $(((bnd >> 21) & 1)) -eq 0 ]
  [ $(((bnd >> 16) & 1)) -eq 0 ]
}

@test "ordinary tools work" {
  esbx_ok exec s1 -- sh -c 'cp README R2 && tar cf /tmp/t.tar R2 src && tar tf /tmp/t.tar'
  assert_output --partial "src/main.c"
  # Written inside: host root has no id in the session's user namespace.
  esbx_ok exec s1 -- sh -c "printf 'all:\n\t@echo built\n' >Makefile"
  esbx_ok exec s1 -- make
  assert_output "built"
  if [ -x /usr/bin/python3 ]; then
    esbx_ok exec s1 -- python3 -c 'import os; print(os.getcwd())'
    assert_output "/workspace"
  fi
}

@test "exit status passes through, 128+N on signal N" {
  esbx_fails 7 exec s1 -- sh -c 'exit 7'
  esbx_fails 143 exec s1 -- sh -c 'kill -TERM $$'
  esbx_fails 137 exec s1 -- sh -c 'kill -KILL $$'
  run -127 "$ESBX" exec s1 -- no-such-command
  assert_output --partial "no-such-command"
}

@test "stdin, stdout and stderr pass through; --env, --cwd and --user apply" {
  run bash -c "echo piped | '$ESBX' exec s1 -- cat"
  assert_success
  assert_output "piped"
  run "$ESBX" exec s1 -- sh -c 'echo to-out; echo to-err >&2'
  assert_success
  assert_line "to-out"
  assert_line "to-err"
  esbx_ok exec s1 --env FOO=bar --env PATH=/bin:/usr/bin -- sh -c 'echo $FOO $PATH $HOSTNAME'
  assert_output "bar /bin:/usr/bin s1"
  esbx_ok exec s1 --cwd src -- pwd
  assert_output "/workspace/src"
  esbx_ok exec s1 --cwd /workspace/docs -- cat guide.txt
  assert_line "line1"
  esbx_ok exec s1 --user 1000:1000 -- sh -c 'id -u; id -g'
  assert_output "$(printf '1000\n1000')"
}

@test "every exec is an event with argv, status, times and byte counts; output is kept" {
  esbx_fails 3 exec s1 -- sh -c 'printf 12345; printf abc >&2; exit 3'
  esbx_ok --json events s1
  last=$(echo "$output" | grep '"type":"exec"' | tail -1)
  [ -n "$last" ]
  echo "$last" | jq -e '.exit_status == 3 and .stdout_bytes == 5 and .stderr_bytes == 3'
  echo "$last" | jq -e '.argv == ["sh","-c","printf 12345; printf abc >&2; exit 3"]'
  echo "$last" | jq -e '.cwd == "/workspace" and .user == null and (.started | length) > 0 and (.ended | length) > 0'
  echo "$last" | jq -e '.cpu_user_usec >= 0 and .max_rss_bytes > 0'
  out=$(echo "$last" | jq -r .stdout_log)
  err=$(echo "$last" | jq -r .stderr_log)
  [ "$(cat "$ESBX_ROOT/sessions/s1/$out")" = "12345" ]
  [ "$(cat "$ESBX_ROOT/sessions/s1/$err")" = "abc" ]
  esbx_ok events s1
  assert_output --partial "holder.start"
  assert_output --regexp "exec .*exit_status=3"
}

@test "events --follow prints new events and stops when the session goes" {
  "$ESBX" events s1 --follow >"$BATS_TEST_TMPDIR/follow" 3>&- &
  follower=$!
  esbx_ok exec s1 -- echo followed
  for _ in $(seq 50); do grep -q followed "$BATS_TEST_TMPDIR/follow" && break; sleep 0.1; done
  run grep -c "exec" "$BATS_TEST_TMPDIR/follow"
  assert_success
  esbx_ok discard s1
  for _ in $(seq 50); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
  run kill -0 "$follower"
  assert_failure
}

@test "bad input: one-line errors, status 1 or 2, nothing started" {
  esbx_fails 1 exec nosuch -- true
  assert_output "esbx: session \`nosuch\` does not exist"
  esbx_fails 2 exec s1
  assert_output --partial "no command"
  esbx_fails 2 exec s1 --
  esbx_fails 2 exec s1 --cwd /etc -- true
  assert_output --partial "outside the workspace"
  esbx_fails 2 exec s1 --cwd ../.. -- true
  esbx_fails 2 exec s1 --env NOEQUALS -- true
  assert_output --partial "invalid --env"
  esbx_fails 2 exec s1 --user root -- true
  esbx_fails 2 exec s1 --bogus -- true
  esbx_fails 1 ps nosuch
  esbx_fails 1 events nosuch
  assert_file_not_exists "$ESBX_ROOT/sessions/s1/holder.json"
}

@test "session env: --env and --env-file reach every exec, exec --env wins, inspect shows it" {
  cat >"$BATS_TEST_TMPDIR/env" <<'ENV'
# a comment
   # an indented comment

FROM_FILE=a value with spaces
SHARED=from-file
CALLER_VAR
NOT_IN_CALLER
EMPTY=
ENV
  export CALLER_VAR=from-caller
  unset NOT_IN_CALLER
  esbx_ok session create p --name e1 --env-file "$BATS_TEST_TMPDIR/env" --env SHARED=from-flag \
    --env CARGO_HOME=/workspace/.cargo
  esbx_ok exec e1 -- sh -c 'echo "$FROM_FILE|$SHARED|$CALLER_VAR|${NOT_IN_CALLER-unset}|${EMPTY-unset}|$CARGO_HOME|$ESBX_SESSION"'
  assert_output "a value with spaces|from-flag|from-caller|unset||/workspace/.cargo|e1"
  esbx_ok exec e1 --env SHARED=from-exec -- sh -c 'echo $SHARED $FROM_FILE'
  assert_output "from-exec a value with spaces"
  esbx_ok --json session inspect e1
  echo "$output" | jq -e '.env == {"FROM_FILE": "a value with spaces", "SHARED": "from-flag",
    "CALLER_VAR": "from-caller", "EMPTY": "", "CARGO_HOME": "/workspace/.cargo"}'
  # The session's env goes on top of the defaults, PATH and HOME too.
  esbx_ok session create p --name e2 --env PATH=/bin --env HOME=/workspace
  esbx_ok exec e2 -- /bin/sh -c 'echo $PATH $HOME'
  assert_output "/bin /workspace"
  esbx_ok --json session inspect s1
  echo "$output" | jq -e '.env == {}'
}

# One error line (usage errors add the verb's forms after it).
one_error_line() {
  [ "$(grep -c '^esbx: ' <<<"$output")" = 1 ] || { echo "not one error line: $output" >&2; return 1; }
}

@test "session env: bad keys and values are refused with one line naming the key, no session" {
  local bad
  for bad in 1X=y A-B=y =y NOEQUALS 'A B=y'; do
    esbx_fails 2 session create p --name bad --env "$bad"
    one_error_line
    assert_line --index 0 --partial "\`${bad%%=*}\`"
    assert_file_not_exists "$ESBX_ROOT/sessions/bad"
  done
  esbx_fails 2 session create p --name bad --env "NL=$(printf 'a\nb')"
  one_error_line
  assert_line --index 0 --partial "\`NL\`"
  assert_file_not_exists "$ESBX_ROOT/sessions/bad"
  esbx_fails 2 session create p --name bad --env "BIG=$(head -c 70000 /dev/zero | tr '\0' x)"
  one_error_line
  assert_line --index 0 --partial "\`BIG\`"
  assert_file_not_exists "$ESBX_ROOT/sessions/bad"
  printf 'OK=1\nBAD KEY=2\n' >"$BATS_TEST_TMPDIR/env"
  esbx_fails 2 session create p --name bad --env-file "$BATS_TEST_TMPDIR/env"
  one_error_line
  assert_line --index 0 --partial "line 2"
  assert_line --index 0 --partial "\`BAD KEY\`"
  assert_file_not_exists "$ESBX_ROOT/sessions/bad"
  esbx_fails 1 session create p --name bad --env-file "$BATS_TEST_TMPDIR/nosuch"
  assert_equal "${#lines[@]}" 1
  assert_output --partial nosuch
  assert_file_not_exists "$ESBX_ROOT/sessions/bad"
}

@test "HOME is /root (a private tmpfs) for uid 0, /tmp for other users" {
  esbx_ok exec s1 -- sh -c 'echo $HOME; touch "$HOME/.probe" && stat -c %a "$HOME"'
  assert_output "$(printf '/root\n700')"
  esbx_ok exec s1 --user 1000 -- sh -c 'echo $HOME'
  assert_output "/tmp"
}

# Building the filter with libseccomp took ~35 ms of every exec: the build
# compiles it once (shim/seccomp/), and a command installs the two programs
# with two seccomp(2) calls, without probing the kernel or linking
# libseccomp.
@test "exec installs the precompiled seccomp programs: two seccomp calls, no libseccomp" {
  command -v strace >/dev/null || skip "strace is not installed"
  esbx_ok exec s1 -- true
  run strace -f -qq -e trace=seccomp -o "$BATS_TEST_TMPDIR/trace" "$ESBX" exec s1 -- true
  assert_success
  run grep -c 'seccomp(' "$BATS_TEST_TMPDIR/trace"
  assert_output 2
  run grep -c 'SECCOMP_SET_MODE_FILTER, 0, {len=' "$BATS_TEST_TMPDIR/trace"
  assert_output 2
  run ldd "$ESBX"
  refute_output --partial libseccomp
}
