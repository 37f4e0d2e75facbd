#!/usr/bin/env bats
# A compromised or wrong registry and etcd (docs/SCALE-OUT.md, "Hostile
# services"): tests/bats/hostile_remote.py plays both on one loopback port
# and answers with content crafted per test from a real layer of a local
# project (its record.json and `esbx export --format oci-layer`), digests
# matching wherever the attack needs them to.  Whatever it answers, esbx
# writes nothing outside its store, does not crash or hang, installs no
# layer, and says what is wrong in one line naming the object.  The first
# test pulls the untampered answers, so that every refusal below is the
# attack's and not the crafting's.

load remote_helpers

HOSTILE=$BATS_TEST_DIRNAME/hostile_remote.py

setup_file() {
  command -v python3 >/dev/null || skip "python3 is not installed"
}

setup() {
  WRAP=()
  ESBXD_PID=
  SRV=$BATS_TEST_TMPDIR/srv
  mkdir -p "$SRV"
  make_tree "$BATS_TEST_TMPDIR/src"
  HOST_A=$(mktemp -d /tmp/esbx-host.XXXXXX)
  HOST_B=$(mktemp -d /tmp/esbx-host.XXXXXX)
  printf '%s\n' "$HOST_A" "$HOST_B" >"$BATS_TEST_TMPDIR/hosts"
  # Next to B's store: nothing of a pull may ever appear in it.
  CANARY=$HOST_B.canary
  mkdir "$CANARY"
  echo victim >"$CANARY/victim"
  on A "$ESBX" project create p --from "$BATS_TEST_TMPDIR/src" >/dev/null
  ID=$(cat "$HOST_A/projects/p/stack")
  on A "$ESBX" export p -o "$BATS_TEST_TMPDIR/layer.tar" --format oci-layer
  # From B's staged diff (ROOT/projects/p/tmp/X/diff) or layers/ID/diff,
  # as many ../ as reach /, then the canary.
  UP=$(printf '../%.0s' $(seq 1 16))${CANARY#/}
  start_hostile
  on B "$ESBX" remote set --registry "http://127.0.0.1:$PORT/x" --etcd "http://127.0.0.1:$PORT"
}

teardown() {
  esbxd_log_if_failed "${D_LOG:-}" 20
  esbxd_down
  [ -z "${SRV_PID:-}" ] || kill "$SRV_PID" 2>/dev/null || true
  teardown_hosts
  rm -rf "$CANARY"
}

start_hostile() {
  local i
  PORT=$(free_port)
  craft
  python3 "$HOSTILE" serve "$PORT" "$SRV" 2>>"$SRV/server.log" &
  SRV_PID=$!
  for i in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/" && return 0
    sleep 0.1
  done
  fail "hostile_remote.py does not answer"
}

# `craft [OPTIONS]`: the server's answers for a pull of A's project p,
# changed as OPTIONS say (hostile_remote.py craft --help).
craft() {
  : >"$SRV/requests.log"
  python3 "$HOSTILE" craft "$SRV" --record "$HOST_A/projects/p/layers/$ID/record.json" \
    --layer "$BATS_TEST_TMPDIR/layer.tar" "$@"
}

# Nothing outside B's store changed, B has no trace of p, its store is
# sound.
assert_untouched() {
  [ -z "$(find "$CANARY" -mindepth 1 ! -name victim)" ] || fail "written outside the store: $(ls -A "$CANARY")"
  [ "$(cat "$CANARY/victim")" = victim ] || fail "the canary file was changed"
  [ "$(stat -c %h "$CANARY/victim")" -eq 1 ] || fail "the canary file was linked into the store"
  [ ! -e "$HOST_B/projects/p" ] || fail "p is there: $(find "$HOST_B/projects/p")"
  [ -z "$(ls -A "$HOST_B/tmp" 2>/dev/null)" ] || fail "temp files left: $(ls -A "$HOST_B/tmp")"
  on B esbx_ok fsck
}

# `pull_refused WORDS...`: project pull fails with status 1 and one line
# holding every WORDS (the object and the cause), and changes nothing.
pull_refused() {
  local w
  run on B timeout 60 "${WRAP[@]}" "$ESBX" project pull p
  [ "$status" -eq 1 ] || fail "project pull exited $status: $output"
  [ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
  for w in "$@"; do
    assert_output --partial "$w"
  done
  assert_untouched
}

@test "the untampered answers pull: the crafting is sound" {
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  on B esbx_ok fsck p
  [ "$(cat "$HOST_B/projects/p/stack")" = "$ID" ]
  diff <(cat "$HOST_A/projects/p/layers/$ID/record.json") "$HOST_B/projects/p/layers/$ID/record.json"
}

@test "a record in the config (as esbx pushes it now) pulls byte for byte" {
  craft --record-in config
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  on B esbx_ok fsck p
  cmp "$HOST_A/projects/p/layers/$ID/record.json" "$HOST_B/projects/p/layers/$ID/record.json"
}

@test "a config that carries no record, or a record that does not fit, is refused" {
  local rec other
  rec=$HOST_A/projects/p/layers/$ID/record.json
  # The same record under another id: it names a layer the head does not.
  other=$(jq -c '.id = "0000000000000000"' "$rec")
  for v in 'not json' '{"os": "linux"}' '{"io.esbx.record": {"id": "x"}}' '{"io.esbx.record": 7}' \
    "$(jq -cn --arg r "$other" '{"io.esbx.record": $r}')" \
    "$(jq -cn --arg r 'not a record' '{"io.esbx.record": $r}')"; do
    craft --record-in config --config-raw "$v"
    pull_refused "fetch layer \`$ID\`" "record"
  done
  # Both forms at once: which record would be read?
  craft --annot "io.esbx.record-config=sha256:$(printf '0%.0s' $(seq 1 64))"
  pull_refused "layer 0 is not an esbx layer"
}

@test "etcd head: layer ids that are paths, empty, huge or not strings are refused" {
  local v
  for v in "\"../../../${CANARY#/}/x\"" '"."' '".."' '""' "\"$(head -c 10240 /dev/zero | tr '\0' a)\"" \
    1 null '{}' '["a"]' "\"$ID/../$ID\"" "\"$ID\\n\""; do
    craft --head "{\"layers\": [$v], \"manifest\": \"sha256:$(printf '0%.0s' $(seq 1 64))\"}"
    pull_refused "etcd \`http://127.0.0.1:$PORT\`" "key \`esbx/projects/p/head\`" "bad layer id"
  done
}

@test "etcd head: layers not a list, no manifest, not JSON, deeply nested: refused" {
  local v
  for v in '{"layers": "abc", "manifest": "sha256:00"}' "{\"layers\": [\"$ID\"]}" \
    '{"layers": [], "manifest": "sha256:00"}' "{\"layers\": {\"0\": \"$ID\"}, \"manifest\": \"x\"}" \
    '[]' 'null' 'layers'; do
    craft --head "$v"
    pull_refused "etcd \`http://127.0.0.1:$PORT\`" "key \`esbx/projects/p/head\`"
  done
  python3 -c 'print("[" * 1000000 + "]" * 1000000)' >"$BATS_TEST_TMPDIR/deep"
  craft --head "@$BATS_TEST_TMPDIR/deep"
  pull_refused "etcd \`http://127.0.0.1:$PORT\`" "key \`esbx/projects/p/head\`" "nested"
}

@test "etcd head: a manifest that is not a sha256 digest is refused before any registry request" {
  local v
  for v in '../../../etc/passwd' 'sha256:../../x' 'head' "sha256:$(printf 'A%.0s' $(seq 1 64))" \
    'sha256:0%0d%0aX-Injected:%201'; do
    craft --head "{\"layers\": [\"$ID\"], \"manifest\": \"$v\"}"
    pull_refused "etcd \`http://127.0.0.1:$PORT\`" "key \`esbx/projects/p/head\`" "manifest"
    ! grep -q '"/v2/' "$SRV/requests.log" || fail "asked the registry: $(cat "$SRV/requests.log")"
  done
}

@test "manifest: annotations and digests that are paths or not sha256 are refused" {
  local v
  for v in "io.esbx.layer=$UP/pwn" "io.esbx.layer=.." "io.esbx.record=sha256:../../../$UP" "io.esbx.record=md5:0123" "io.esbx.record=" \
    "io.esbx.record=sha256:$(printf '0%.0s' $(seq 1 64))/../x"; do
    craft --annot "$v"
    pull_refused "project \`p\`" "layer 0"
  done
  for v in "sha256:../../../$UP" "sha512:00" "sha256:" "sha256:0%0d%0aX-Injected:%201"; do
    craft --layer-digest "$v"
    pull_refused "project \`p\`" "layer 0"
  done
}

@test "manifest: 100,000 layers, 50 MB, not JSON, deeply nested: refused in bounded time" {
  SECONDS=0
  craft --layers 100000
  pull_refused "registry \`http://127.0.0.1:$PORT/x\`" "manifest \`sha256:" "larger than 16 MiB"
  craft --layers 20000
  pull_refused "project \`p\`" "the head's manifest has 20000 layers, etcd 1"
  [ "$SECONDS" -lt 30 ]
  craft --manifest-pad $((50 * 1024 * 1024))
  pull_refused "registry \`http://127.0.0.1:$PORT/x\`" "manifest \`sha256:" "larger than"
  craft --manifest-raw 'this is not JSON'
  pull_refused "registry \`http://127.0.0.1:$PORT/x\`" "manifest \`sha256:" "invalid JSON"
  python3 -c 'print("[" * 1000000 + "]" * 1000000)' >"$BATS_TEST_TMPDIR/deep"
  craft --manifest-raw "@$BATS_TEST_TMPDIR/deep"
  pull_refused "registry \`http://127.0.0.1:$PORT/x\`" "manifest \`sha256:" "nested"
}

@test "manifest: an answer without end is cut off, memory bounded" {
  craft --manifest-gen '{"head": "{\"layers\": [", "repeat": "{\"a\": 1}, ", "forever": true}'
  SECONDS=0
  pull_refused "registry \`http://127.0.0.1:$PORT/x\`" "manifest \`sha256:" "larger than"
  [ "$SECONDS" -lt 30 ]
  # esbx hung up; the server had sent a bounded amount (the cap is 16 MiB).
  run jq -s '[.[] | select(.path | contains("/manifests/")) | .sent] | max' "$SRV/requests.log"
  [ "$output" -lt $((40 * 1024 * 1024)) ] || fail "esbx read $output bytes"
}

@test "layer blob: an answer without end is cut off at the size its descriptor gives" {
  layer=$(jq -r .layer "$SRV/routes.json")
  craft --route "{\"method\": \"GET\", \"path\": \"/v2/x/p/blobs/$layer\", \"gen\": {\"repeat\": \"x\", \"forever\": true}}"
  SECONDS=0
  pull_refused "blob $layer" "larger than the"
  [ "$SECONDS" -lt 30 ]
  # esbx hung up after about the descriptor's size, not at a full disk.
  run jq -s "[.[] | select(.path | contains(\"/blobs/$layer\")) | .sent] | max" "$SRV/requests.log"
  [ "$output" -lt $((8 * 1024 * 1024)) ] || fail "esbx read $output bytes"
}

@test "record: deletions and opaque marks with .., absolute paths and / stay beneath the layer" {
  local base c
  base=$(jq -c .changes "$HOST_A/projects/p/layers/$ID/record.json")
  for c in "{\"path\": \"/$UP/pwn\", \"kind\": \"deleted\", \"type\": \"file\"}" \
    "{\"path\": \"/../../../../pwn\", \"kind\": \"deleted\", \"type\": \"file\"}" \
    "{\"path\": \"$CANARY/pwn\", \"kind\": \"deleted\", \"type\": \"file\"}" \
    '{"path": "/", "kind": "deleted", "type": "dir"}' \
    "{\"path\": \"$CANARY\", \"kind\": \"added\", \"type\": \"dir\", \"opaque\": true}" \
    "{\"path\": \"/$UP\", \"kind\": \"added\", \"type\": \"dir\", \"opaque\": true}"; do
    craft --record-changes "$(jq -c --argjson c "$c" '. + [$c]' <<<"$base")"
    pull_refused "fetch layer \`$ID\`"
  done
}

# The layer's tar makes `a` a symlink to the canary; the record then
# deletes a/victim, a/new, or marks a opaque.
symlink_then_marks() {
  local base c
  base=$(jq -c .changes "$HOST_A/projects/p/layers/$ID/record.json")
  for c in '{"path": "/a/victim", "kind": "deleted", "type": "file"}' \
    '{"path": "/a/new", "kind": "deleted", "type": "file"}' \
    '{"path": "/a", "kind": "added", "type": "dir", "opaque": true}'; do
    craft --tar "[{\"name\": \"a\", \"type\": \"symlink\", \"target\": \"$CANARY\"}]" \
      --record-changes "$(jq -c --argjson c "$c" '. + [$c]' <<<"$base")"
    pull_refused "fetch layer \`$ID\`"
    [ -z "$(getfattr -d -m - "$CANARY" 2>/dev/null)" ] || fail "the canary was marked"
  done
}

@test "record: marks through a symlink the layer's tar made stay beneath the layer" {
  symlink_then_marks
}

@test "record: the same with openat2 refused (the openat walk)" {
  [ -x "$ESBX_BUILD/tests/without-openat2" ] || skip "tests/without-openat2 not built"
  WRAP=("$ESBX_BUILD/tests/without-openat2")
  symlink_then_marks
}

# `tar_attack ENTRIES`: a layer blob (digest-correct, the record A's) made
# of ENTRIES is refused, or unpacked with nothing outside the store.
tar_attack() {
  craft --tar "$1"
  run on B timeout 60 "$ESBX" project pull p
  if [ "$status" -eq 0 ]; then
    on B esbx_ok fsck
    on B esbx_ok project rm p
  else
    [ "$status" -eq 1 ] || fail "project pull exited $status: $output"
    [ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
    assert_output --partial "fetch layer \`$ID\`"
  fi
  assert_untouched
}

@test "layer blob: entries with ../, absolute names, through a symlink, hard links outside: nothing outside" {
  tar_attack "[{\"name\": \"$UP/pwn\", \"data\": \"x\"}]"
  tar_attack "[{\"name\": \"$CANARY/pwn\", \"data\": \"x\"}]"
  tar_attack "[{\"name\": \"s\", \"type\": \"symlink\", \"target\": \"$CANARY\"}, {\"name\": \"s/pwn\", \"data\": \"x\"}]"
  tar_attack "[{\"name\": \"s\", \"type\": \"symlink\", \"target\": \"$CANARY\"}, {\"name\": \"s/victim\", \"data\": \"pwned\"}]"
  tar_attack "[{\"name\": \"s\", \"type\": \"symlink\", \"target\": \"../../../../../../../../../../..$CANARY\"}, {\"name\": \"s/pwn\", \"data\": \"x\"}]"
  tar_attack '[{"name": "h", "type": "hardlink", "target": "/etc/passwd"}]'
  tar_attack "[{\"name\": \"h\", \"type\": \"hardlink\", \"target\": \"$CANARY/victim\"}, {\"name\": \"h\", \"data\": \"pwned\"}]"
  tar_attack "[{\"name\": \"s\", \"type\": \"symlink\", \"target\": \"$CANARY\"}, {\"name\": \"h\", \"type\": \"hardlink\", \"target\": \"s/victim\"}]"
  [ "$(stat -c %h /etc/passwd)" -eq 1 ]
}

# `esbxd_watching_hostile`: esbxd of B watching the hostile etcd (B has p
# shared, pulled untampered, so its syncs have nothing to do), metrics on
# a free port.
esbxd_watching_hostile() {
  on B esbx_ok project pull p
  D_LOG=$BATS_TEST_TMPDIR/esbxd.log
  esbxd_up "$HOST_B" "$BATS_TEST_TMPDIR" "$D_LOG" \
    --etcd "http://127.0.0.1:$PORT" --registry "http://127.0.0.1:$PORT/x"
}

# `watch_attack GEN SECONDS WORDS`: etcd's watch answers GEN (a route's
# "gen"); esbxd logs the outage in one warning line holding WORDS (on a
# loaded host reading a large answer may take longer than SECONDS), and for
# SECONDS after it stays up and answers, reconnects a bounded number of
# times and does not spin.
watch_attack() {
  local gen secs=$2 words=$3 n cpu0 cpu1 start took
  gen=$(cat "$1")
  echo "{\"method\": \"POST\", \"path\": \"/v3/watch\", \"gen\": $gen}" >"$BATS_TEST_TMPDIR/route"
  craft --route "@$BATS_TEST_TMPDIR/route"
  esbxd_watching_hostile
  start=$SECONDS
  cpu0=$(awk '{print $14 + $15}' "/proc/$ESBXD_PID/stat")
  wait_log "$D_LOG" "etcd watch: .*$words" 60 || fail "no warning: $(tail -n 5 "$D_LOG")"
  sleep "$secs"
  kill -0 "$ESBXD_PID" || fail "esbxd died: $(tail -n 5 "$D_LOG")"
  curl -sf "http://127.0.0.1:$METRICS_PORT/healthz" >/dev/null || fail "esbxd does not answer"
  cpu1=$(awk '{print $14 + $15}' "/proc/$ESBXD_PID/stat")
  took=$((SECONDS - start + 1))
  # Clock ticks (100 a second): well below one CPU (a spin takes all).
  [ $((cpu1 - cpu0)) -le $((took * 75)) ] || fail "esbxd used $((cpu1 - cpu0)) ticks in $took s"
  n=$(grep -c '"/v3/watch"' "$SRV/requests.log")
  [ "$n" -ge 1 ] && [ "$n" -le $((took * 3)) ] || fail "$n watch requests in $took s"
  run grep -c "etcd watch: .*$words" "$D_LOG"
  [ "$output" -eq 1 ] || fail "$output warnings: $(tail -n 8 "$D_LOG")"
  ! grep -q 'etcd watch: .*etcd watch:' "$D_LOG"
}

@test "esbxd watch: an object of 20 MB without end is cut off at 16 MiB" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  echo '{"head": "{\"result\": {\"events\": [\"", "repeat": "x", "forever": true}' >"$BATS_TEST_TMPDIR/gen"
  watch_attack "$BATS_TEST_TMPDIR/gen" 3 "larger than 16 MiB"
}

@test "esbxd watch: malformed JSON, then a created watch that turns malformed" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  echo '{"head": "{\"result\": {]}}\n"}' >"$BATS_TEST_TMPDIR/gen"
  watch_attack "$BATS_TEST_TMPDIR/gen" 3 "invalid JSON"
}

@test "esbxd watch: created, then malformed: backoff all the same" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  echo '{"head": "{\"result\": {\"header\": {\"revision\": \"5\"}, \"created\": true}}\n{\"result\": {]}}\n"}' >"$BATS_TEST_TMPDIR/gen"
  watch_attack "$BATS_TEST_TMPDIR/gen" 3 "invalid JSON"
}

@test "esbxd watch: deeply nested JSON" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  python3 -c 'import json; print(json.dumps({"head": "{\"result\": " + "[" * 200000, "repeat": "]", "count": 200000, "tail": "}\n"}))' >"$BATS_TEST_TMPDIR/gen"
  watch_attack "$BATS_TEST_TMPDIR/gen" 3 "nested"
}

@test "esbxd watch: keys outside esbx/projects/, ../ in a key, 100,000 events: ignored" {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  python3 - "$BATS_TEST_TMPDIR/gen" <<'PY'
import base64, json, sys
def ev(key, rev):
    return {"kv": {"key": base64.b64encode(key.encode()).decode(), "mod_revision": str(rev),
                   "value": base64.b64encode(b"{}").decode()}}
created = {"result": {"header": {"revision": "5"}, "created": True}}
evs = [ev("esbx/projects/../../x/head", 6), ev("other/p/head", 7), ev("esbx/projects/p/../../q/head", 8),
       ev("esbx/projects//head", 9), ev("esbx/projects/p/head/../../../x", 10)]
evs += [ev("esbx/projects/n%d/head" % i, 11 + i) for i in range(100000)]
body = json.dumps(created) + "\n" + json.dumps({"result": {"header": {"revision": "100011"}, "events": evs}}) + "\n"
json.dump({"head": body}, open(sys.argv[1], "w"))
PY
  watch_attack "$BATS_TEST_TMPDIR/gen" 3 "the watch ended"
  [ ! -e "$HOST_B/projects/x" ]
  [ ! -e "$HOST_B/x" ]
  [ ! -e "$HOST_B/projects/n1" ]
  assert_untouched_store
}

# B's store is sound and nothing appeared next to it (p stays: it was
# pulled before the attack).
assert_untouched_store() {
  [ -z "$(find "$CANARY" -mindepth 1 ! -name victim)" ] || fail "written outside the store"
  on B esbx_ok fsck
}

# `token_attack ANSWER`: the registry asks for a token, the realm answers
# ANSWER (a route's body fields).
token_attack() {
  craft --auth "$1" "${@:2}"
}

@test "token realm: not JSON, 50 MB, no token: one line naming the realm, nothing pulled" {
  local realm="token realm \`http://127.0.0.1:$PORT/token\`"
  token_attack '{"body": "<html>not json</html>"}'
  pull_refused "$realm" "not JSON"
  token_attack '{"gen": {"head": "{\"token\": \"", "repeat": "a", "count": 52428800, "tail": "\"}"}}'
  pull_refused "$realm" "larger than 16 MiB"
  token_attack '{"body": "{\"expires_in\": 60}"}'
  pull_refused "$realm" "no usable token"
}

@test "token realm: CR/LF or spaces in a token never reach a header" {
  local t realm="token realm \`http://127.0.0.1:$PORT/token\`"
  for t in 'abc\r\nX-Injected: 1' 'abc\nX-Injected: 1' 'abc\rX-Injected: 1' 'a b' 'abc\u0000def'; do
    token_attack "{\"body\": \"{\\\"token\\\": \\\"$t\\\"}\"}"
    pull_refused "$realm"
    ! grep -qi 'x-injected' "$SRV/requests.log" || fail "injected: $(grep -i x-injected "$SRV/requests.log")"
    token_attack "{\"body\": \"{\\\"token\\\": \\\"\\\", \\\"access_token\\\": \\\"$t\\\"}\"}"
    pull_refused "$realm"
    ! grep -qi 'x-injected' "$SRV/requests.log" || fail "injected"
  done
}

@test "token realm: expires_in negative or huge still works; a redirect is not followed" {
  local e
  for e in -5 0 9223372036854775807 1e300 '"soon"'; do
    token_attack "{\"body\": \"{\\\"token\\\": \\\"t0k\\\", \\\"expires_in\\\": ${e//\"/\\\"}}\"}"
    run on B "$ESBX" project pull p
    assert_success
    grep -q '"Authorization", "Bearer t0k"' "$SRV/requests.log"
    on B esbx_ok fsck p
    on B esbx_ok project rm p
  done
  token_attack '{"status": 302, "headers": {"Location": "http://127.0.0.1:1/token2"}}' \
    --route '{"method": "GET", "path": "/token2", "body": "{\"token\": \"t0k\"}"}'
  pull_refused "token realm \`http://127.0.0.1:$PORT/token\`" "HTTP 302"
  if grep -q '/token2' "$SRV/requests.log"; then fail "the realm's redirect was followed"; fi
}
