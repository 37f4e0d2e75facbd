#!/usr/bin/env bats
# Secrets: esbx secret create|list|rm, session create --secret (a file on
# the session's private /run/secrets, or an exec's environment), and every
# place a value must never reach: the upper directory, diff, export,
# published layers, events and logs.

bats_require_minimum_version 1.5.0
# The gateway's helpers (their hooks replaced below); a test starts esbxd
# on its store only when it needs one (setup_gateway keeps the store that
# setup made).
# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load gateway_helpers

# A value no test writes by accident: long enough to be scanned at publish.
VALUE=tok-9f2c71e4a8b3-Zq7XvP

setup() {
  setup_session
  printf '%s\n' "$VALUE" | "$ESBX" secret create tok
}

teardown() { teardown_gateway; }

# Every file under the store but the secrets' own directory that holds the
# value; the test's other directories are added by the caller.
grep_value() {
  grep -rlaF --exclude-dir=secrets "$VALUE" "$ESBX_ROOT" "$@" 2>/dev/null
}

@test "secret create, list and rm: root-only files, list shows no value" {
  assert_equal "$(stat -c %a "$ESBX_ROOT/secrets")" 700
  assert_equal "$(stat -c %a "$ESBX_ROOT/secrets/tok")" 600
  # The trailing newline of `echo` is cut.
  assert_equal "$(stat -c %s "$ESBX_ROOT/secrets/tok")" "${#VALUE}"
  printf 'from-a-file-value\n\n' >"$BATS_TEST_TMPDIR/v"
  esbx_ok secret create other --from-file "$BATS_TEST_TMPDIR/v"
  assert_equal "$(cat "$ESBX_ROOT/secrets/other")" from-a-file-value
  esbx_ok secret list
  assert_line --regexp "^NAME"
  assert_line --regexp "^tok	${#VALUE}	[0-9]{4}-"
  assert_line --regexp "^other	17	"
  refute_output --partial "$VALUE"
  refute_output --partial from-a-file-value
  esbx_ok --json secret list
  refute_output --partial "$VALUE"
  assert_output --partial '"name": "tok"'
  # Once made, a secret does not change: rm and create it again.
  run "$ESBX" secret create tok <<<"other-value"
  assert_failure 1
  assert_output --partial "secret \`tok\` exists already"
  assert_equal "$(cat "$ESBX_ROOT/secrets/tok")" "$VALUE"
  run "$ESBX" secret create empty </dev/null
  assert_failure 2
  esbx_fails 2 secret create ../x --from-file "$BATS_TEST_TMPDIR/v"
  esbx_ok secret rm other
  assert_file_not_exists "$ESBX_ROOT/secrets/other"
  esbx_fails 1 secret rm other
  assert_output --partial "secret \`other\` does not exist"
  [ -z "$(grep_value)" ]
}

@test "--secret: a 0400 file on the session's private /run/secrets, not on the host's view" {
  make_session p s2 --secret tok
  # The output is redacted (its own test below): the value is compared in
  # the session, and what comes out is exactly the value's mark.
  esbx_ok exec s2 -- cat /run/secrets/tok
  assert_output "***tok***"
  esbx_ok exec s2 -- sh -c '[ "$(cat /run/secrets/tok)" = "$1" ] && echo same' sh "$VALUE"
  assert_output same
  esbx_ok exec s2 -- stat -c '%a %U' /run/secrets /run/secrets/tok
  assert_line --index 0 "700 root"
  assert_line --index 1 "400 root"
  # Read-only, and not something a command can make executable.
  run "$ESBX" exec s2 -- sh -c 'echo x >/run/secrets/tok'
  assert_failure
  esbx_ok exec s2 -- sh -c 'grep " /run/secrets " /proc/self/mounts'
  assert_output --regexp "tmpfs /run/secrets tmpfs ro,.*noexec"
  # The workspace is the session's merged view; nothing of the secret is
  # there, nor in any mount of the host.
  esbx_ok exec s2 -- sh -c "cp /run/secrets/tok /tmp/copy && cat /tmp/copy"
  assert_output "***tok***"
  run grep -F /run/secrets /proc/self/mountinfo
  assert_failure
  [ ! -e "$m/run/secrets" ]
  run grep -rlaF "$VALUE" "$ESBX_ROOT/sessions/s2/upper" "$m"
  assert_output ""
  # A session without --secret has none.
  run "$ESBX" exec s1 -- ls /run/secrets
  assert_failure
  esbx_ok session inspect s2
  assert_output --partial '"name": "tok"'
  refute_output --partial "$VALUE"
}

@test "--secret NAME,env=VAR: each exec's environment; file= names the file" {
  make_session p s2 --secret tok,env=API_TOKEN
  esbx_ok exec s2 -- sh -c 'echo "[$API_TOKEN]"; ls /run/secrets 2>&1 || true'
  assert_line --index 0 "[***tok***]"
  assert_line --index 1 --partial "No such file"
  esbx_ok exec s2 -- sh -c '[ "$API_TOKEN" = "$1" ] && echo same' sh "$VALUE"
  assert_output same
  # exec --env still wins.
  esbx_ok exec s2 --env API_TOKEN=mine -- sh -c 'echo "$API_TOKEN"'
  assert_output mine
  make_session p s3 --secret tok,env=T,file=/run/secrets/token.txt
  esbx_ok exec s3 -- sh -c 'cat /run/secrets/token.txt; echo; echo "$T"'
  assert_line --index 0 "***tok***"
  assert_line --index 1 "***tok***"
  # Nothing was kept by the execs above: they printed nothing that is logged
  # here (redaction has its own tests), and the record holds names only.
  run grep -aF "$VALUE" "$ESBX_ROOT"/sessions/s3/session.json
  assert_failure
}

@test "--secret refuses unknown secrets, bad files and doubles, changing nothing" {
  esbx_fails 1 session create p --name bad --secret nope
  assert_output --partial "secret \`nope\` does not exist"
  esbx_fails 2 session create p --name bad --secret tok,file=/etc/passwd
  assert_output --partial "file must be /run/secrets/FILE"
  esbx_fails 2 session create p --name bad --secret tok,file=/run/secrets/../x
  esbx_fails 2 session create p --name bad --secret tok,env=1BAD
  esbx_fails 2 session create p --name bad --secret tok,mode=0444
  assert_output --partial "unknown option \`mode=0444\`"
  esbx_fails 2 session create p --name bad --secret tok --secret tok,env=X
  assert_output --partial "given twice"
  run "$ESBX" session inspect bad
  assert_failure
}

@test "secret rm is refused while a session names the secret" {
  make_session p s2 --secret tok,env=T
  esbx_fails 1 secret rm tok
  assert_output --partial "secret \`tok\` is used by session \`s2\`"
  assert_file_exists "$ESBX_ROOT/secrets/tok"
  esbx_ok discard s2 --force
  esbx_ok secret rm tok
}

@test "a session's secret is absent from diff, export, published layers, events and logs" {
  printf '%s' "$VALUE" | "$ESBX" secret create tok2
  make_session p s3 --secret tok --secret tok2,env=T
  esbx_ok exec s3 -- sh -c 'test -s /run/secrets/tok && test -n "$T" && echo work >/workspace/out.txt'
  esbx_ok exec s3 -- sh -c 'cat /run/secrets/tok >/dev/null; echo done'
  esbx_ok diff s3
  assert_output "A /out.txt"
  esbx_ok diff s3 --patch
  refute_output --partial "$VALUE"
  esbx_ok events s3 --json
  refute_output --partial "$VALUE"
  esbx_ok export s3 -o "$BATS_TEST_TMPDIR/s3.tar"
  esbx_ok publish s3 -m work
  esbx_ok export p -o "$BATS_TEST_TMPDIR/p.tar"
  tar -tf "$BATS_TEST_TMPDIR/p.tar" | grep -q out.txt
  run grep_value "$BATS_TEST_TMPDIR/s3.tar" "$BATS_TEST_TMPDIR/p.tar"
  assert_output ""
}

@test "publish refuses a changed file holding a secret's value, naming the path; --allow-secret lets it through" {
  make_session p s2 --secret tok,env=T
  # The value in the middle of a file larger than one read, across the
  # scanner's chunk boundary.
  esbx_ok exec s2 -- sh -c 'mkdir -p /workspace/conf && head -c 65530 /dev/zero | tr "\0" a >/workspace/conf/leak.cfg && printf "%s\n" "$T" >>/workspace/conf/leak.cfg && echo fine >/workspace/ok.txt'
  run "$ESBX" publish s2 -m leak
  assert_failure 1
  assert_output --partial "/conf/leak.cfg"
  assert_output --partial "secret \`tok\`"
  assert_output --partial "--allow-secret tok"
  refute_output --partial "$VALUE"
  # Nothing was published.
  esbx_ok project log p
  refute_output --partial leak
  esbx_fails 2 publish s2 --allow-secret ../x
  esbx_ok publish s2 -m leak --allow-secret tok
  grep -qF "$VALUE" "$ESBX_ROOT"/projects/p/layers/*/diff/conf/leak.cfg
}

@test "publish scans only the session's own secrets, and not values shorter than 8 bytes" {
  printf 'abc123' | "$ESBX" secret create short
  make_session p s2 --secret short
  esbx_ok exec s2 -- sh -c "echo abc123 >/workspace/a; echo $VALUE >/workspace/b"
  # tok is not this session's: its value in a file is ordinary content.
  esbx_ok publish s2 -m ok
}

@test "exec output is redacted in the caller's output and the logs, also when the value is split across writes" {
  make_session p s2 --secret tok,env=T
  # Printed whole, then in two writes a moment apart (two reads of the
  # monitor), on stdout and stderr; argv holding the value is redacted in
  # the event.
  esbx_ok exec s2 -- sh -c 'echo "a $T b"; v=$T; printf "%s" "${v%????????}"; sleep 0.3; printf "%s|\n" "${v#"${v%????????}"}"; echo "e:$T" >&2; true '"$VALUE"
  assert_line --index 0 "a ***tok*** b"
  assert_line --index 1 "***tok***|"
  assert_line --index 2 "e:***tok***"
  refute_output --partial "$VALUE"
  # A prefix of the value that is not followed by the rest passes as is.
  esbx_ok exec s2 -- sh -c 'v=$T; printf "%s\n" "${v%????????}"'
  assert_output "${VALUE%????????}"
  esbx_ok events s2 --json
  assert_output --partial '***tok***'
  refute_output --partial "$VALUE"
  # Nowhere under the store but ROOT/secrets.
  run grep_value
  assert_output ""
  run cat "$ESBX_ROOT"/sessions/s2/logs/1.out
  assert_output --partial "a ***tok*** b"
}

@test "gateway: secrets with the manage scope; no token reads a value, observe and runtime see names only" {
  setup_gateway
  manage=$(token manage)
  runtime=$(token runtime)
  observe=$(token observe)
  all=$(token manage,runtime,observe)
  gw_expect 201 POST /v1/secrets "$manage" '{"name":"gw1","value":"gateway-value-77f1e2d9"}'
  assert_equal "$(cat "$ESBX_ROOT/secrets/gw1")" gateway-value-77f1e2d9
  gw_expect 403 POST /v1/secrets "$runtime" '{"name":"gw2","value":"x-value-123456"}'
  gw_expect 403 POST /v1/secrets "$observe" '{"name":"gw2","value":"x-value-123456"}'
  assert_file_not_exists "$ESBX_ROOT/secrets/gw2"
  gw_expect 400 POST /v1/secrets "$manage" '{"name":"gw2","value":"v","mode":"0444"}'
  # Names, sizes, times: never a value, for any token.
  for t in "$observe" "$all"; do
    gw_expect 200 GET /v1/secrets "$t"
    assert_output --partial '"name":"tok"'
    refute_output --partial "$VALUE"
    refute_output --partial gateway-value
  done
  gw_expect 403 GET /v1/secrets "$runtime"
  for t in "$observe" "$runtime" "$all"; do
    gw GET /v1/secrets/tok "$t"
    refute_output --partial "$VALUE"
    [ "$http_code" != 200 ]
  done
  # A session made over the gateway with secrets; its inspect shows names.
  gw_expect 201 POST /v1/sessions "$manage" '{"project":"p","name":"g1","secrets":["tok,env=T","gw1"]}'
  for t in "$observe" "$all"; do
    gw_expect 200 GET /v1/sessions/g1 "$t"
    assert_output --partial '"name":"gw1"'
    refute_output --partial "$VALUE"
  done
  # Exec output through the gateway, one document and streamed: redacted.
  gw_expect 200 POST /v1/sessions/g1/exec "$runtime" '{"argv":["sh","-c","echo \"$T\"; cat /run/secrets/gw1"]}'
  assert_output --partial '***tok***'
  assert_output --partial '***gw1***'
  refute_output --partial "$VALUE"
  refute_output --partial gateway-value
  gw_expect 200 POST /v1/sessions/g1/exec "$runtime" '{"argv":["sh","-c","echo \"$T\" >&2"],"stream":true}'
  refute_output --partial "$VALUE"
  gw_expect 200 GET /v1/sessions/g1/events "$observe"
  refute_output --partial "$VALUE"
  # The remote CLI: list, and publish with --allow-secret.
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$all" "$ESBX" secret list
  assert_success
  assert_line --regexp "^gw1	22	"
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$all" "$ESBX" session create p --name g2 --secret gw1,env=G
  assert_success
  run env ESBX_HOST="unix://$GW_SOCK" ESBX_TOKEN="$all" "$ESBX" exec g2 -- sh -c 'echo "$G"'
  assert_output "***gw1***"
  esbx_ok discard g2 --force
  gw_expect 200 POST /v1/sessions/g1/exec "$runtime" '{"argv":["sh","-c","cp /run/secrets/gw1 /workspace/copy"]}'
  gw_expect 403 POST /v1/sessions/g1/publish "$manage" '{}'
  assert_output --partial '/copy'
  refute_output --partial gateway-value
  gw_expect 200 POST /v1/sessions/g1/publish "$manage" '{"allow_secrets":["gw1"]}'
  gw_expect 400 DELETE /v1/secrets/gw1 "$manage"
  assert_output --partial "used by session"
  gw_expect 403 DELETE /v1/secrets/tok "$observe"
  run grep_value
  assert_output ""
}

# The volume plugin's protocol straight on esbxd's plugin socket (no
# dockerd: 30-plugin.bats has the `docker volume create -o secret=` test).
@test "plugin protocol: Create with -o secret= and secret.KEY= attaches secrets; an unknown one makes nothing" {
  setup_gateway
  printf 'second-value-0a1b2c3d' | "$ESBX" secret create tok2
  plugin() {
    local out
    out=$(curl -s --unix-socket "$GW_DIR/plugin.sock" -X POST --data-binary "$2" \
      -w '\n%{http_code}' "http://plugin/$1")
    http_code=${out##*$'\n'}
    output=${out%$'\n'*}
  }
  plugin VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "p", "secret": "nope"}}'
  assert_equal "$http_code" 404
  assert_output --partial "secret \`nope\` does not exist"
  run "$ESBX" session inspect v1
  assert_failure
  plugin VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "p", "secret": "tok,env=T", "secret.b": "tok2"}}'
  assert_equal "$http_code" 200
  esbx_ok exec v1 -- sh -c 'echo "$T"; cat /run/secrets/tok2'
  assert_line --index 0 "***tok***"
  assert_line --index 1 "***tok2***"
}

@test "secret create --project: only that project's sessions use it, Docker volumes included" {
  setup_gateway
  esbx_ok project create q
  printf 'owned-by-p-value-31f0' | "$ESBX" secret create ofp --project p
  esbx_fails 1 secret create x --project nosuch <<<"some-value-123"
  assert_output --partial "project \`nosuch\` does not exist"
  assert_file_not_exists "$ESBX_ROOT/secrets/x"
  esbx_ok secret list
  assert_line --regexp "^ofp	21	[0-9]{4}-.*	p$"
  assert_line --regexp "^tok	${#VALUE}	[0-9]{4}-.*	-$"
  esbx_ok secret list --project p
  assert_equal "$(echo "$output" | tail -n +2 | cut -f1)" ofp
  esbx_fails 1 session create q --name bad --secret ofp
  assert_output --partial "secret \`ofp\` belongs to project \`p\`"
  run "$ESBX" session inspect bad
  assert_failure
  make_session p s2 --secret ofp
  esbx_ok exec s2 -- cat /run/secrets/ofp
  assert_output "***ofp***"
  # A fork is a new session of its project: the same rule.
  make_session q q1
  esbx_fails 1 session fork q1 --name bad --secret ofp
  assert_output --partial "belongs to project \`p\`"
  run "$ESBX" session inspect bad
  assert_failure
  esbx_ok session fork s2 --name f1 --secret ofp
  # Through the plugin socket as dockerd would call it: a volume of q
  # cannot name p's secret.
  plugin() {
    local out
    out=$(curl -s --unix-socket "$GW_DIR/plugin.sock" -X POST --data-binary "$2" \
      -w '\n%{http_code}' "http://plugin/$1")
    http_code=${out##*$'\n'}
    output=${out%$'\n'*}
  }
  plugin VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "q", "secret": "ofp"}}'
  assert_equal "$http_code" 403
  assert_output --partial "belongs to project"
  run "$ESBX" session inspect v1
  assert_failure
  plugin VolumeDriver.Create '{"Name": "v2", "Opts": {"project": "p", "secret.a": "ofp,env=O"}}'
  assert_equal "$http_code" 200
  # A project removed and made again is another project: the secret is
  # not its.
  printf 'owned-by-q-value-31f0' | "$ESBX" secret create ofq --project q
  esbx_ok discard q1
  esbx_ok project rm q
  esbx_ok project create q
  esbx_fails 1 session create q --name bad --secret ofq
  assert_output --partial "another one"
}

@test "ps and the gateway's ps show command lines redacted, as logs and events are" {
  setup_gateway
  make_session p s2 --secret tok,env=T
  "$ESBX" exec s2 -- sh -c 'exec sh -c "sleep 60" "$T"' >/dev/null 2>&1 &
  bg=$!
  for _ in $(seq 50); do
    "$ESBX" ps s2 2>/dev/null | grep -q "sleep 60" && break
    sleep 0.1
  done
  esbx_ok ps s2
  assert_output --partial 'sh -c sleep 60 ***tok***'
  refute_output --partial "$VALUE"
  esbx_ok --json ps s2
  refute_output --partial "$VALUE"
  observe=$(token observe)
  gw_expect 200 GET /v1/sessions/s2/ps "$observe"
  assert_output --partial '***tok***'
  refute_output --partial "$VALUE"
  esbx_ok session stop s2
  wait "$bg" || true
}

@test "forks, snapshots and the sessions made from them keep their secrets' names for publish, never the values" {
  make_session p s2 --secret tok,env=T
  esbx_ok exec s2 -- sh -c 'printf "%s\n" "$T" >/workspace/leak.txt'
  esbx_fails 1 publish s2 -m leak
  assert_output --partial "secret \`tok\`"

  # A fork: its own state is the snapshot's, and so is the value.
  esbx_ok session fork s2 --name f1
  esbx_fails 1 publish f1 -m leak
  assert_output --partial "/leak.txt"
  assert_output --partial "secret \`tok\`"
  # The name only: the fork's commands get no value, and print none.
  esbx_ok exec f1 -- sh -c 'echo "[$T]"; ls /run/secrets 2>&1 || true'
  assert_line --index 0 "[]"
  assert_line --index 1 --partial "No such file"
  esbx_ok exec f1 -- cat /workspace/leak.txt
  assert_output "***tok***"
  # A fork of the fork, and a session made from a snapshot.
  esbx_ok session fork f1 --name f2
  esbx_fails 1 publish f2 -m leak
  esbx_ok session snapshot s2 --name snap1
  esbx_ok session create p --name r1 --from-snapshot snap1
  esbx_fails 1 publish r1 -m leak
  assert_output --partial "secret \`tok\`"
  esbx_ok --json session inspect r1
  assert_equal "$(json_field kept_secrets <<<"$output")" '["tok"]'
  esbx_ok --json snapshot inspect snap1
  assert_equal "$(json_field secrets <<<"$output")" '["tok"]'

  # The snapshot taken when a session's lifetime ends.
  make_session p e1 --secret tok,env=T --ttl 1s --on-expiry snapshot
  esbx_ok exec e1 -- sh -c 'printf "%s\n" "$T" >/workspace/leak.txt'
  sleep 1.5
  esbx_ok gc
  snap=$("$ESBX" --json snapshot list | python3 -c 'import json, sys; print([s["name"] for s in json.load(sys.stdin) if s["name"].startswith("e1-expired-")][0])')
  esbx_ok session create p --name r2 --from-snapshot "$snap"
  esbx_fails 1 publish r2 -m leak
  assert_output --partial "secret \`tok\`"

  # While a snapshot or a session keeps the name, the secret stays: the
  # scan needs its value.
  for s in s2 f1 f2 r1 r2; do esbx_ok discard "$s" --force; done
  esbx_fails 1 secret rm tok
  assert_output --partial "snapshot"
  # --allow-secret lets it through, as for the session itself.
  make_session p r3 --from-snapshot snap1
  esbx_ok publish r3 -m leak --allow-secret tok
}

@test "publish refuses a secret's value in a file name or a symlink target; diff shows them redacted" {
  setup_gateway
  make_session p s2 --secret tok,env=T
  esbx_ok exec s2 -- sh -c 'mkdir -p /workspace/d && touch "/workspace/d/x-$T.txt"'
  esbx_fails 1 publish s2 -m leak
  assert_output --partial "/d/x-***tok***.txt"
  assert_output --partial "secret \`tok\`"
  refute_output --partial "$VALUE"
  esbx_ok diff s2
  assert_output --partial "A /d/x-***tok***.txt"
  refute_output --partial "$VALUE"
  esbx_ok --json diff s2
  refute_output --partial "$VALUE"
  observe=$(token observe)
  gw_expect 200 GET /v1/sessions/s2/diff "$observe"
  assert_output --partial '***tok***'
  refute_output --partial "$VALUE"

  esbx_ok exec s2 -- sh -c 'rm -r /workspace/d && ln -s "/etc/$T" /workspace/l2 && mkdir "/workspace/dir-$T"'
  esbx_fails 1 publish s2 -m leak
  assert_output --partial "secret \`tok\`"
  refute_output --partial "$VALUE"
  gw_expect 200 GET /v1/sessions/s2/diff "$observe"
  assert_output --partial '"target":"/etc/***tok***"'
  assert_output --partial '/dir-***tok***'
  refute_output --partial "$VALUE"
  esbx_ok exec s2 -- sh -c 'rmdir "/workspace/dir-$T"'
  esbx_fails 1 publish s2 -m leak
  assert_output --partial "\`/l2\` points at"
  # Nothing reached a layer; allowed, it goes as it is.
  run grep -rlaF "$VALUE" "$ESBX_ROOT/projects"
  assert_output ""
  esbx_ok publish s2 -m leak --allow-secret tok
  [ -n "$(find "$ESBX_ROOT/projects/p/layers" -lname "/etc/$VALUE")" ]
}
