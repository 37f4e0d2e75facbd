#!/usr/bin/env bats
# Sessions that outlive their host (docs/SCALE-OUT.md): a snapshot pushed
# to the remote (its diff and record as an OCI artifact in a real
# docker-registry, its record in a real etcd) and a session made from it
# on another host; the project's automatic pushes (before each publish,
# every N seconds from esbxd, at --on-expiry snapshot); a registry or etcd
# that is down fails the push loudly.

load remote_helpers

setup_file() {
  setup_remote_file
}

teardown_file() {
  teardown_remote_services
}

# `wait_until SECONDS CMD...`: CMD until it succeeds, at most SECONDS.
wait_until() {
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || return 1
    sleep 0.1
  done
}

setup() {
  setup_hosts_ab
  on A esbx_ok project push p
}

teardown() {
  esbxd_down
  [ -z "${HOST_B:-}" ] || rm -rf "$HOST_B.canary"
  teardown_hosts
}

# The value of etcd key KEY (no value: nothing).
etcd_value() {
  local key
  key=$(printf '%s' "$1" | base64 -w0)
  in_svc curl -fsS -X POST "$(ETCD_URL)/v3/kv/range" -d "{\"key\":\"$key\"}" |
    jq -r '.kvs[0].value // empty' | base64 -d
}

# Session s1 on host A with a change of each kind: a new file, a modified
# one, a deleted one, a directory emptied and made again (opaque), a
# symlink, an empty directory.
changed_session_on_a() {
  on A make_session p s1
  echo new >"$m/new.txt"
  echo more >>"$m/README"
  rm "$m/src/main.c"
  rm -r "$m/docs"
  mkdir "$m/docs"
  echo fresh >"$m/docs/only.txt"
  ln -s new.txt "$m/alias"
  mkdir -p "$m/empty/dir"
  chmod 751 "$m/empty"
}

@test "session snapshot --push on one host, session create --from-snapshot on another" {
  changed_session_on_a
  run on A "$ESBX" session snapshot s1 --name snap1 --push
  assert_success
  assert_output snap1
  # The record in etcd, the session's last pushed snapshot, the artifact.
  run etcd_value esbx/projects/p/snapshots/snap1
  assert_success
  local manifest
  manifest=$(echo "$output" | jq -r .manifest)
  [[ "$manifest" == sha256:* ]]
  [ "$(echo "$output" | jq -r .session)" = s1 ]
  run etcd_value esbx/projects/p/sessions/s1/snapshot
  [ "$(echo "$output" | jq -r .snapshot)" = snap1 ]
  run curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/manifests/snap.snap1"
  assert_success
  [ "$(echo "$output" | jq -r .config.mediaType)" = application/vnd.esbx.snapshot.v1+json ]
  [ "$(echo "$output" | jq -r '.annotations["io.esbx.snapshot"]')" = snap1 ]
  run on A "$ESBX" --json snapshot inspect snap1
  [ "$(echo "$output" | jq -r .manifest)" = "$manifest" ]

  # Host B has never seen the project: the create pulls it and the
  # snapshot, and the session shows A's state exactly.
  on B esbx_ok session create p --from-snapshot snap1 --name r1
  local a b
  a=$(on A "$ESBX" session path s1)
  b=$(on B "$ESBX" session path r1)
  diff -r --no-dereference "$a" "$b"
  [ ! -e "$b/src/main.c" ]
  [ ! -e "$b/docs/guide.txt" ]
  [ "$(cat "$b/docs/only.txt")" = fresh ]
  [ "$(readlink "$b/alias")" = new.txt ]
  [ "$(stat -c %a "$b/empty")" = 751 ]
  run on B "$ESBX" --json snapshot inspect snap1
  [ "$(echo "$output" | jq -r .pulled)" = true ]
  [ "$(echo "$output" | jq -r .session)" = s1 ]
  # Its publish lands A's work and its own in one layer.
  echo b >"$b/from-b.txt"
  on B esbx_ok publish r1
  on A esbx_ok project pull p
  on A esbx_ok session create p --name check
  local c
  c=$(on A "$ESBX" session path check)
  [ "$(cat "$c/new.txt")" = new ]
  [ "$(cat "$c/from-b.txt")" = b ]
  [ ! -e "$c/src/main.c" ]
  [ ! -e "$c/docs/guide.txt" ]
}

@test "a snapshot of a session made from a pushed one carries its parent to a third host" {
  changed_session_on_a
  on A esbx_ok session snapshot s1 --name base1 --push
  on B esbx_ok session create p --from-snapshot base1 --name r1
  echo second >"$(on B "$ESBX" session path r1)/second.txt"
  run on B "$ESBX" session snapshot r1 --name top1 --push
  assert_success
  [ "$(etcd_value esbx/projects/p/snapshots/top1 | jq -r .parent)" = base1 ]
  new_host C
  on C esbx_ok session create p --from-snapshot top1 --name r2
  local c
  c=$(on C "$ESBX" session path r2)
  [ "$(cat "$c/second.txt")" = second ]
  [ "$(cat "$c/new.txt")" = new ]
  [ ! -e "$c/src/main.c" ]
  run on C "$ESBX" snapshot list --project p
  assert_output --partial base1
  assert_output --partial top1
  # Pushing again is harmless; a snapshot of that name with other content
  # from elsewhere is refused.
  on B esbx_ok snapshot push top1
  on C make_session p other
  echo x >"$m/x"
  on C esbx_ok session snapshot other --name mine
  etcd_value esbx/projects/p/snapshots/top1 >"$BATS_TEST_TMPDIR/top1"
  in_svc curl -fsS -o /dev/null -X POST "$(ETCD_URL)/v3/kv/put" \
    -d "{\"key\":\"$(printf esbx/projects/p/snapshots/mine | base64 -w0)\",\"value\":\"$(base64 -w0 <"$BATS_TEST_TMPDIR/top1")\"}"
  run on C "$ESBX" snapshot push mine
  assert_failure
  assert_output --partial "snapshot \`mine\`: etcd \`$(ETCD_URL)\` has another snapshot of that name"
}

@test "the registry or etcd down: --push fails loudly, the snapshot stays here, a later push works" {
  changed_session_on_a
  stop_registry
  run on A "$ESBX" session snapshot s1 --name snap2 --push
  assert_failure 1
  assert_output --partial "snapshot \`snap2\` is kept here, not pushed"
  assert_output --partial "registry \`$(REGISTRY_URL)\`"
  [ "${#lines[@]}" -eq 1 ]
  [ -z "$(etcd_value esbx/projects/p/snapshots/snap2)" ]
  run on A "$ESBX" snapshot list --project p
  assert_output --partial snap2
  start_registry
  stop_etcd
  run on A "$ESBX" snapshot push snap2
  assert_failure 1
  assert_output --partial "etcd \`$(ETCD_URL)\`"
  start_etcd
  run on A "$ESBX" snapshot push snap2
  assert_success
  [ -n "$(etcd_value esbx/projects/p/snapshots/snap2)" ]
  on B esbx_ok session create p --from-snapshot snap2
  # Unknown everywhere: not found, nothing made.
  run on B "$ESBX" session create p --from-snapshot nosuch
  assert_failure 1
  assert_output --partial "snapshot \`nosuch\` is neither here nor in etcd"
  # A project that is not shared has no remote to push to.
  on A esbx_ok project create local1 --from "$BATS_TEST_TMPDIR/src"
  on A make_session local1 l1
  on A esbx_ok session snapshot l1 --name lsnap
  run on A "$ESBX" snapshot push lsnap
  assert_failure 2
  assert_output --partial "project \`local1\` is not shared"
  run on A "$ESBX" project snapshot-push local1 --on-publish on
  assert_failure 2
}

@test "project snapshot-push --on-publish: every publish attempt pushes first; a failed push stops the publish" {
  run on A "$ESBX" project snapshot-push p
  assert_success
  [ "$(echo "$output" | jq -r .on_publish)" = false ]
  on A esbx_ok project snapshot-push p --on-publish on
  on A make_session p s1
  echo one >"$m/one.txt"
  on A esbx_ok publish s1 -m one
  local snap
  snap=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  [[ "$snap" == s1-auto-* ]]
  # A session keeps its latest automatic snapshot only.
  echo two >"$m/two.txt"
  on A esbx_ok publish s1 -m two
  local snap2
  snap2=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  [ "$snap2" != "$snap" ]
  run on A "$ESBX" snapshot list --project p
  refute_output --partial "$snap"$'\n'
  assert_output --partial "$snap2"
  # Registry down: the publish fails with the registry's error and
  # publishes nothing.
  local before
  before=$(etcd_head p)
  echo three >"$m/three.txt"
  stop_registry
  run on A "$ESBX" publish s1 -m three
  assert_failure 1
  assert_output --partial "the snapshot pushed before a publish"
  assert_output --partial "registry \`$(REGISTRY_URL)\`"
  start_registry
  [ "$(etcd_head p)" = "$before" ]
  [ -e "$m/three.txt" ]
  on A esbx_ok project snapshot-push p --on-publish off
  on A esbx_ok publish s1 -m three
}

# HTTP status of a GET of the registry's PATH (under the test's repository).
registry_status() {
  in_svc curl -s -o /dev/null -w '%{http_code}' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/$1"
}

@test "a replaced automatic snapshot leaves the remote too, unless a snapshot builds on it; garbage-collect frees its blobs" {
  local snap1 snap2 snap3 m1 cfg1
  on A esbx_ok project snapshot-push p --on-publish on
  on A make_session p s1
  echo one >"$m/one.txt"
  on A esbx_ok publish s1 -m one
  snap1=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  m1=$(etcd_value "esbx/projects/p/snapshots/$snap1" | jq -r .manifest)
  cfg1=$(in_svc curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/manifests/$m1" | jq -r .config.digest)
  [ "$(registry_status "blobs/$cfg1")" = 200 ]
  echo two >"$m/two.txt"
  on A esbx_ok publish s1 -m two
  snap2=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  [ "$snap2" != "$snap1" ]
  # snap1 is gone: here, from etcd, its manifest (and tag) from the registry.
  [ -z "$(etcd_value "esbx/projects/p/snapshots/$snap1")" ]
  [ "$(registry_status "manifests/$m1")" = 404 ]
  run on A "$ESBX" snapshot list --project p
  refute_output --partial "$snap1"
  # A session of B made from snap2, and a snapshot of it pushed: snap2 is
  # that snapshot's parent, so it stays in etcd when s1 moves on.
  on B esbx_ok session create p --from-snapshot "$snap2" --name r2
  on B esbx_ok session snapshot r2 --name fork1 --push
  [ "$(etcd_value esbx/projects/p/snapshots/fork1 | jq -r .parent)" = "$snap2" ]
  echo three >"$m/three.txt"
  on A esbx_ok publish s1 -m three
  snap3=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  [ "$snap3" != "$snap2" ]
  [ -n "$(etcd_value "esbx/projects/p/snapshots/$snap2")" ]
  # A third host still gets fork1 with its parent.
  new_host C
  on C esbx_ok session create p --from-snapshot fork1 --name c1
  [ "$(cat "$(on C "$ESBX" session path c1)/two.txt")" = two ]
  # The registry's garbage-collect frees snap1's blobs; the others stay.
  stop_registry
  run docker-registry garbage-collect "$REMOTE_DIR/registry.yml"
  assert_success
  start_registry
  [ "$(registry_status "blobs/$cfg1")" = 404 ]
  new_host D
  on D esbx_ok session create p --from-snapshot "$snap3" --name d1
  [ "$(cat "$(on D "$ESBX" session path d1)/three.txt")" = three ]
}

@test "project snapshot-push --every: esbxd pushes changed sessions, and only changed ones" {
  on A esbx_ok project snapshot-push p --every 1s
  on A make_session p s1
  on A make_session p idle
  on A make_session p tick
  esbxd_up "$HOST_A" "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/esbxd.log"
  echo work >"$(on A "$ESBX" session path s1)/work.txt"
  local snap=
  pushed_snap() {
    snap=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r '.snapshot // empty')
    [ -n "$snap" ]
  }
  wait_until 60 pushed_snap
  [[ "$snap" == s1-auto-* ]]
  wait_log "$BATS_TEST_TMPDIR/esbxd.log" "session \`s1\`: pushed snapshot \`$snap\`"
  # Nothing changed since: no new push in the rounds after.  A round is
  # known to have passed once session tick, written after s1's push, is
  # pushed twice (its second push is in a later round than the first,
  # which is not earlier than s1's); the idle session (nothing in it) was
  # never pushed.
  local t
  ticks() { [ "$(grep -c "session \`tick\`: pushed snapshot" "$BATS_TEST_TMPDIR/esbxd.log")" -ge "$1" ]; }
  for t in 1 2; do
    echo "$t" >"$(on A "$ESBX" session path tick)/tick.txt"
    wait_until 60 ticks "$t"
  done
  [ "$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)" = "$snap" ]
  [ "$(grep -c "session \`s1\`: pushed snapshot" "$BATS_TEST_TMPDIR/esbxd.log")" -eq 1 ]
  [ -z "$(etcd_value esbx/projects/p/sessions/idle/snapshot)" ]
  # B resumes from it.
  on B esbx_ok session create p --from-snapshot "$snap" --name r1
  [ "$(cat "$(on B "$ESBX" session path r1)/work.txt")" = work ]
}

@test "--on-expiry snapshot with snapshot-push --on-expiry: the retired session's snapshot is pushed" {
  on A esbx_ok project snapshot-push p --on-expiry on
  on A make_session p s1 --ttl 1s --on-expiry snapshot
  echo late >"$m/late.txt"
  # gc until the lifetime is past (nothing of a live session is touched).
  retired() {
    run on A "$ESBX" gc
    assert_success
    [[ "$output" == *"kept as snapshot"* ]]
  }
  wait_until 30 retired
  local snap
  snap=$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)
  [[ "$snap" == s1-expired-* ]]
  on B esbx_ok session create p --from-snapshot "$snap" --name r1
  [ "$(cat "$(on B "$ESBX" session path r1)/late.txt")" = late ]
}

@test "etcd naming a manifest that is not a snapshot's: refused, nothing installed" {
  changed_session_on_a
  on A esbx_ok session snapshot s1 --name bad1 --push
  # Point etcd's record at the manifest of another tag: the layer of the
  # project, not a snapshot's.
  local head_manifest value
  head_manifest=$(etcd_head p | jq -r .manifest)
  value=$(jq -cn --arg m "$head_manifest" '{manifest: $m, session: "s1", parent: null}')
  in_svc curl -fsS -o /dev/null -X POST "$(ETCD_URL)/v3/kv/put" \
    -d "{\"key\":\"$(printf esbx/projects/p/snapshots/bad1 | base64 -w0)\",\"value\":\"$(printf '%s' "$value" | base64 -w0)\"}"
  run on B "$ESBX" session create p --from-snapshot bad1
  assert_failure 1
  assert_output --partial "its manifest is not a snapshot's"
  [ ! -e "$HOST_B/projects/p/snapshots/bad1" ]
  [ -z "$(ls "$HOST_B/sessions" 2>/dev/null)" ]
}

# POST BODY to the plugin socket of the esbxd in $BATS_TEST_TMPDIR:
# `volume_call ENDPOINT BODY`; the answer in $output.
volume_call() {
  run curl -sS --unix-socket "$BATS_TEST_TMPDIR/plugin.sock" -X POST -d "$2" "http://plugin/$1"
}

@test "a volume with -o resume=last starts from the last snapshot its session pushed on another host" {
  changed_session_on_a
  on A esbx_ok session snapshot s1 --push
  echo later >"$m/later.txt"
  on A esbx_ok session snapshot s1 --name s1-last --push
  # Host B's esbxd, asked by Docker for volume s1 (as a task rescheduled
  # from A would be): A's last pushed state.
  esbxd_up "$HOST_B" "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/esbxd.log"
  volume_call VolumeDriver.Create '{"Name": "s1", "Opts": {"project": "p", "resume": "last", "push-every": "1m"}}'
  assert_output '{}'
  grep -q "volume \`s1\`: resuming from snapshot \`s1-last\` of session \`s1\`" "$BATS_TEST_TMPDIR/esbxd.log"
  local b
  b=$(on B "$ESBX" session path s1)
  [ "$(cat "$b/later.txt")" = later ]
  [ ! -e "$b/src/main.c" ]
  [ "$(on B "$ESBX" --json session inspect s1 | jq -r .snapshot)" = s1-last ]
  # Nothing pushed for that name: a new session.
  volume_call VolumeDriver.Create '{"Name": "fresh", "Opts": {"project": "p", "resume": "last"}}'
  assert_output '{}'
  [ ! -e "$(on B "$ESBX" session path fresh)/new.txt" ]
  # etcd down: the create fails naming it, and makes nothing.
  stop_etcd
  volume_call VolumeDriver.Create '{"Name": "s9", "Opts": {"project": "p", "resume": "last"}}'
  assert_output --partial "etcd \`$(ETCD_URL)\`"
  start_etcd
  [ ! -e "$HOST_B/sessions/s9" ]
  volume_call VolumeDriver.Create '{"Name": "s8", "Opts": {"project": "p", "resume": "last", "snapshot": "x"}}'
  assert_output --partial "not with \`snapshot\` or \`base\`"
}

@test "a resumed volume's secrets and egress policy come from its options and the new host's store; no value reaches the registry" {
  printf 'A-SECRET-VALUE-4242\n' | on A "$ESBX" secret create tok
  on A make_session p s1 --secret tok --network egress --allow example.test
  echo work >"$m/work.txt"
  on A esbx_ok session snapshot s1 --push
  printf 'B-SECRET-VALUE-9191\n' | on B "$ESBX" secret create tok
  esbxd_up "$HOST_B" "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/esbxd.log"
  volume_call VolumeDriver.Create '{"Name": "s1", "Opts": {"project": "p", "resume": "last", "secret": "tok", "network": "egress", "allow": "example.test"}}'
  assert_output '{}'
  run on B "$ESBX" --json session inspect s1
  [ "$(echo "$output" | jq -r '.secrets[0].name')" = tok ]
  [ "$(echo "$output" | jq -r '.kept_secrets[0]')" = tok ]
  [ "$(echo "$output" | jq -r .network)" = egress ]
  echo "$output" | jq -e '.egress.allow == ["example.test"]' >/dev/null
  [ "$(cat "$(on B "$ESBX" session path s1)/work.txt")" = work ]
  # Neither value is anywhere in the registry's storage or in etcd.
  ! grep -rqa 'SECRET-VALUE' "$REMOTE_DIR/registry"
  ! etcd_value esbx/projects/p/snapshots/"$(etcd_value esbx/projects/p/sessions/s1/snapshot | jq -r .snapshot)" | grep -q SECRET-VALUE
  # A copy of A's value that the session wrote into its workspace is
  # still caught by B's publish: the snapshot kept the name.
  printf 'B-SECRET-VALUE-9191\n' >"$(on B "$ESBX" session path s1)/leak.txt"
  run on B "$ESBX" publish s1
  assert_failure 1
  assert_output --partial tok
}

# `registry_put_blob FILE`: FILE uploaded as a blob of p's repository; its
# digest on stdout.
registry_put_blob() {
  local base=http://127.0.0.1:$REGISTRY_PORT repo=t$BATS_TEST_NUMBER/p hex loc
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  loc=$(curl -fsSi -X POST "$base/v2/$repo/blobs/uploads/" | tr -d '\r' | awk 'tolower($1) == "location:" {print $2}')
  case $loc in /*) loc=$base$loc ;; esac
  curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$1" "$loc&digest=sha256:$hex"
  echo "sha256:$hex"
}

@test "a hostile snapshot artifact: whiteouts and opaque paths that climb out of the diff write nothing outside the store" {
  changed_session_on_a
  on A esbx_ok session snapshot s1 --name good1 --push
  local base=http://127.0.0.1:$REGISTRY_PORT repo=t$BATS_TEST_NUMBER/p manifest cfg up canary
  canary=$HOST_B.canary
  mkdir "$canary"
  echo victim >"$canary/victim"
  mkdir "$canary/dir"
  up=$(printf '../%.0s' $(seq 1 16))${canary#/}
  manifest=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$base/v2/$repo/manifests/snap.good1")
  cfg=$(curl -fsS "$base/v2/$repo/blobs/$(echo "$manifest" | jq -r .config.digest)")
  local kind path
  for kind in whiteouts opaque; do
    path=$([ "$kind" = whiteouts ] && echo "$up/made-by-attack" || echo "$up/dir")
    echo "$cfg" | jq -c --arg k "$kind" --arg p "$path" '.record.name = "evil" | .[$k] += [$p]' >"$BATS_TEST_TMPDIR/cfg.json"
    local cdigest csize mdigest
    cdigest=$(registry_put_blob "$BATS_TEST_TMPDIR/cfg.json")
    csize=$(stat -c %s "$BATS_TEST_TMPDIR/cfg.json")
    echo "$manifest" | jq -c --arg d "$cdigest" --argjson s "$csize" '.config.digest = $d | .config.size = $s' >"$BATS_TEST_TMPDIR/m.json"
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
      --data-binary "@$BATS_TEST_TMPDIR/m.json" "$base/v2/$repo/manifests/snap.evil"
    mdigest=sha256:$(sha256sum "$BATS_TEST_TMPDIR/m.json" | cut -d' ' -f1)
    in_svc curl -fsS -o /dev/null -X POST "$(ETCD_URL)/v3/kv/put" \
      -d "{\"key\":\"$(printf esbx/projects/p/snapshots/evil | base64 -w0)\",\"value\":\"$(jq -cn --arg m "$mdigest" '{manifest: $m, session: "s1", parent: null}' | base64 -w0)\"}"
    run on B "$ESBX" session create p --from-snapshot evil --name e1
    assert_failure 1
    [ "${#lines[@]}" -eq 1 ]
    assert_output --partial "snapshot \`evil\`"
    # Nothing outside the store changed; no snapshot, no session.
    [ "$(ls "$canary")" = "$(printf 'dir\nvictim')" ]
    [ "$(cat "$canary/victim")" = victim ]
    python3 -c 'import os, sys; sys.exit(1 if "trusted.overlay.opaque" in os.listxattr(sys.argv[1]) else 0)' "$canary/dir"
    [ ! -e "$HOST_B/projects/p/snapshots/evil" ]
    [ ! -e "$HOST_B/sessions/e1" ]
  done
  rm -rf "$canary"
  # The untampered one still pulls.
  on B esbx_ok session create p --from-snapshot good1
}

@test "over the gateway: session snapshot --push pushes, and fails as loudly" {
  on A make_session p s1
  echo gw >"$m/gw.txt"
  esbxd_up "$HOST_A" "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/esbxd.log" --gateway-socket "$BATS_TEST_TMPDIR/gw.sock"
  local tok
  tok=$(on A "$ESBX" token create --scope manage)
  run env ESBX_HOST="unix://$BATS_TEST_TMPDIR/gw.sock" ESBX_TOKEN="$tok" "$ESBX" session snapshot s1 --name gw1 --push
  assert_success
  assert_output gw1
  [ -n "$(etcd_value esbx/projects/p/snapshots/gw1)" ]
  stop_registry
  run env ESBX_HOST="unix://$BATS_TEST_TMPDIR/gw.sock" ESBX_TOKEN="$tok" "$ESBX" session snapshot s1 --name gw2 --push
  start_registry
  assert_failure 1
  assert_output --partial "snapshot \`gw2\` is kept here, not pushed"
  on B esbx_ok session create p --from-snapshot gw1
}
