#!/usr/bin/env bats
# Several hosts, one history (docs/SCALE-OUT.md): layers in a real OCI
# registry (docker-registry), the head in a real etcd, both on 127.0.0.1
# for this file; each "host" is a store root of its own.

load remote_helpers

setup_file() {
  setup_remote_file
}

teardown_file() {
  teardown_remote_services
}

setup() { setup_hosts_ab; }

teardown() {
  stop_tls_registry "$BATS_TEST_TMPDIR/tls"
  teardown_hosts
}

# The tree of project P's head on host H, extracted into DIR.
head_tree() {
  rm -rf "$3"
  mkdir -p "$3"
  on "$1" "$ESBX" export "$2" -o "$BATS_TEST_TMPDIR/export.tar"
  tar -xf "$BATS_TEST_TMPDIR/export.tar" -C "$3"
}

@test "remote set stores the registry and etcd; bad URLs are usage errors" {
  run on A "$ESBX" remote show
  assert_success
  assert_line "registry $(REGISTRY_URL)"
  assert_line "etcd $(ETCD_URL)"
  run on A "$ESBX" remote set --registry ftp://x --etcd "$(ETCD_URL)"
  assert_failure 2
  assert_output --partial "--registry"
  run on A "$ESBX" remote show
  assert_line "registry $(REGISTRY_URL)"
}

@test "project push: every layer in the registry, the head in etcd; pull on another host" {
  on A make_session p s1
  echo new >"$m/new.txt"
  rm "$m/docs/guide.txt"
  on A esbx_ok publish s1
  on A esbx_ok project push p
  run etcd_head p
  assert_output --partial "\"layers\":[\"$(on A head -n1 "$HOST_A/projects/p/stack")\""
  run skopeo inspect --tls-verify=false "docker://127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER/p:head"
  assert_success
  [ "$(echo "$output" | jq '.Layers | length')" -eq 2 ]
  echo "$output" | jq -r '.RepoTags[]' | grep -qx "$(tail -n1 "$HOST_A/projects/p/stack")"
  # Pushing again is harmless.
  on A esbx_ok project push p

  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 2 layers fetched"
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  on B esbx_ok fsck p
  head_tree A p "$BATS_TEST_TMPDIR/a"
  head_tree B p "$BATS_TEST_TMPDIR/b"
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  [ ! -e "$BATS_TEST_TMPDIR/b/docs/guide.txt" ]
  on B make_session p s2
  [ "$(cat "$m/new.txt")" = new ]
  [ ! -e "$m/docs/guide.txt" ]
}

@test "publishes of disjoint changes from two hosts all land; every host ends on the same head" {
  local h i
  on A esbx_ok project push p
  on B esbx_ok project pull p
  for h in A B; do
    for i in 1 2 3 4; do
      on "$h" "$ESBX" session create p --name "$h$i" >/dev/null
      echo "$h$i" >"$(on "$h" "$ESBX" session path "$h$i")/file-$h$i"
    done
  done
  for h in A B; do
    for i in 1 2 3 4; do
      on "$h" "$ESBX" publish "$h$i" >"$BATS_TEST_TMPDIR/out-$h$i" 2>&1 &
    done
  done
  local failed=0
  for job in $(jobs -p); do wait "$job" || failed=$((failed + 1)); done
  cat "$BATS_TEST_TMPDIR"/out-* >&2
  [ "$failed" -eq 0 ]
  local head
  head=$(etcd_head p)
  [ "$(echo "$head" | jq '.layers | length')" -eq 9 ]
  on A esbx_ok project pull p
  on B esbx_ok project pull p
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  [ "$(echo "$head" | jq -r '.layers[]')" = "$(cat "$HOST_A/projects/p/stack")" ]
  head_tree A p "$BATS_TEST_TMPDIR/a"
  head_tree B p "$BATS_TEST_TMPDIR/b"
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  for h in A B; do
    for i in 1 2 3 4; do
      [ "$(cat "$BATS_TEST_TMPDIR/a/file-$h$i")" = "$h$i" ]
    done
  done
  on A esbx_ok fsck p
  on B esbx_ok fsck p
}

@test "overlapping publishes from two hosts: one exits 3 with the path, rebase, then it lands" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  on A make_session p a
  echo from-a >"$m/README"
  on B make_session p b
  echo from-b >"$m/README"
  on A esbx_ok publish a
  run on B "$ESBX" publish b
  assert_failure 3
  assert_output --partial "/README"
  # The session keeps its work; its host now has A's layer.
  [ "$(cat "$m/README")" = from-b ]
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  echo resolved >"$m/README"
  run on B "$ESBX" rebase b
  echo resolved >"$(on B "$ESBX" session path b)/README"
  on B esbx_ok publish b
  on A make_session p a2
  [ "$(cat "$m/README")" = resolved ]
}

@test "session create on a host behind the etcd head fetches the missing layers first" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  on A make_session p a
  echo one >"$m/one.txt"
  on A esbx_ok publish a
  [ "$(wc -l <"$HOST_B/projects/p/stack")" -eq 1 ]
  on B make_session p b
  [ "$(cat "$m/one.txt")" = one ]
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
}

@test "registry down: publish exits 1 naming the URL, nothing changes, the next publish lands" {
  on A esbx_ok project push p
  on A make_session p a
  echo work >"$m/work.txt"
  cp "$HOST_A/projects/p/stack" "$BATS_TEST_TMPDIR/stack.before"
  local before
  before=$(etcd_head p)
  stop_registry
  run on A "$ESBX" publish a
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "http://127.0.0.1:$REGISTRY_PORT"
  diff "$BATS_TEST_TMPDIR/stack.before" "$HOST_A/projects/p/stack"
  [ "$(etcd_head p)" = "$before" ]
  run on A "$ESBX" diff a
  assert_output "A /work.txt"
  start_registry
  on A esbx_ok publish a
  [ "$(wc -l <"$HOST_A/projects/p/stack")" -eq 2 ]
  on A esbx_ok fsck p
}

@test "etcd down before the transaction: publish exits 1 naming the URL, the next one lands" {
  on A esbx_ok project push p
  on A make_session p a
  echo work >"$m/work.txt"
  stop_etcd
  run on A "$ESBX" publish a
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "etcd \`http://127.0.0.1:$ETCD_PORT\`"
  [ "$(wc -l <"$HOST_A/projects/p/stack")" -eq 1 ]
  run on B "$ESBX" project pull p
  assert_failure 1
  [ ! -e "$HOST_B/projects/p" ]
  start_etcd
  on A esbx_ok publish a
  on B esbx_ok project pull p
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
}

@test "a publisher killed between push and transaction, or after it, leaves one head everywhere" {
  if ! strings "$ESBX" | grep -qx 'ESBX_FAILPOINT'; then
    skip "esbx built without ESBX_FAILPOINTS"
  fi
  on A esbx_ok project push p
  on A make_session p a
  echo work >"$m/work.txt"
  run on A env ESBX_FAILPOINT=remote-pushed "$ESBX" publish a
  [ "$status" -eq 137 ]
  [ "$(etcd_head p | jq '.layers | length')" -eq 1 ]
  [ "$(wc -l <"$HOST_A/projects/p/stack")" -eq 1 ]
  run on A env ESBX_FAILPOINT=remote-head-moved "$ESBX" publish a
  [ "$status" -eq 137 ]
  [ "$(etcd_head p | jq '.layers | length')" -eq 2 ]
  # The head names a layer this host never installed: the next sync
  # fetches it, and the session's work is in the head.
  on B esbx_ok project pull p
  on A esbx_ok project pull p
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  on A esbx_ok fsck p
  on A esbx_ok gc
  on B make_session p b
  [ "$(cat "$m/work.txt")" = work ]
}

@test "a corrupted layer blob is refused with a digest mismatch; nothing is installed" {
  on A esbx_ok project push p
  local digest data
  digest=$(etcd_head p >/dev/null; skopeo inspect --tls-verify=false \
    "docker://127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER/p:head" | jq -r '.Layers[0]')
  data="$REMOTE_DIR/registry/docker/registry/v2/blobs/sha256/${digest:7:2}/${digest#sha256:}/data"
  cp "$data" "$BATS_TEST_TMPDIR/good"
  # One byte changed inside the blob (a write past its end would make it
  # longer than its descriptor, which is refused before any digest).
  python3 -c 'import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2); b = f.read(1); f.seek(-1, 1); f.write(bytes([b[0] ^ 0xff]))' "$data"
  run on B "$ESBX" project pull p
  assert_failure 1
  assert_output --partial "digest mismatch"
  [ ! -e "$HOST_B/projects/p" ]
  cp "$BATS_TEST_TMPDIR/good" "$data"
  on B esbx_ok project pull p
}

@test "unreachable registry or etcd: push exits 1 with the URL and cause, nothing is marked" {
  local port
  port=$(free_port)
  run on A env ESBX_REGISTRY="http://127.0.0.1:$port/x" "$ESBX" project push p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "http://127.0.0.1:$port"
  assert_output --partial "connect"
  [ ! -e "$HOST_A/projects/p/remote" ]
  run on A env ESBX_ETCD="http://127.0.0.1:$port" "$ESBX" project push p
  assert_failure 1
  assert_output --partial "etcd \`http://127.0.0.1:$port\`"
  [ ! -e "$HOST_A/projects/p/remote" ]
}

@test "a head pushed in the older form (a record blob per layer) takes publishes; a pull reads both forms in one stack" {
  local old=$BATS_TEST_TMPDIR/old id
  mkdir -p "$old"
  on A make_session p a1
  echo one >"$m/one.txt"
  on A esbx_ok publish a1
  cp "$HOST_A/projects/p/stack" "$old/stack"
  for id in $(cat "$old/stack"); do
    cp "$HOST_A/projects/p/layers/$id/record.json" "$old/$id.record"
    on A esbx_ok export "p@$id" -o "$old/$id.tar" --format oci-layer
  done
  in_svc python3 "$BATS_TEST_DIRNAME/old_layout_push.py" "$(REGISTRY_URL)" "$(ETCD_URL)" p "$old"
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 2 layers fetched"
  on B make_session p b1
  echo two >"$m/two.txt"
  on B esbx_ok publish b1
  # The old layers keep their descriptors; the new one's record is in the
  # config of its manifest.
  run in_svc curl -fsS -H "Accept: application/vnd.oci.image.manifest.v1+json" \
    "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/manifests/head"
  assert_success
  [ "$(jq -c '[.layers[].annotations | [has("io.esbx.record"), has("io.esbx.record-config")]]' <<<"$output")" \
    = '[[true,false],[true,false],[false,true]]' ]
  [ "$(jq -r '.layers[2].annotations["io.esbx.record-config"]' <<<"$output")" = "$(jq -r .config.digest <<<"$output")" ]
  new_host C
  run on C "$ESBX" project pull p
  assert_success
  assert_output "p: 3 layers fetched"
  on C esbx_ok fsck p
  for id in $(cat "$HOST_B/projects/p/stack"); do
    cmp "$HOST_B/projects/p/layers/$id/record.json" "$HOST_C/projects/p/layers/$id/record.json"
  done
  head_tree B p "$BATS_TEST_TMPDIR/b"
  head_tree C p "$BATS_TEST_TMPDIR/c"
  diff -r "$BATS_TEST_TMPDIR/b" "$BATS_TEST_TMPDIR/c"
  [ "$(cat "$BATS_TEST_TMPDIR/c/two.txt")" = two ]
}

@test "the kept head manifest is used only when it is the one etcd names: a changed file is read again from the registry" {
  local kept=$HOST_A/projects/p/remote-manifest
  on A esbx_ok project push p
  on A make_session p a1
  echo one >"$m/one.txt"
  on A esbx_ok publish a1
  [ -s "$kept" ]
  # The same JSON without its first layer: a publish that believed it
  # would push a head that lacks that layer.
  jq -c 'del(.layers[0])' "$kept" >"$kept.new"
  mv "$kept.new" "$kept"
  on A make_session p a2
  echo two >"$m/two.txt"
  on A esbx_ok publish a2
  run in_svc curl -fsS -H "Accept: application/vnd.oci.image.manifest.v1+json" \
    "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/manifests/head"
  assert_success
  [ "$(jq '.layers | length' <<<"$output")" -eq 3 ]
  [ "$(jq -r '[.layers[].annotations["io.esbx.layer"]] | join(" ")' <<<"$output")" = "$(tr '\n' ' ' <"$HOST_A/projects/p/stack" | sed 's/ $//')" ]
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 3 layers fetched"
  on B esbx_ok fsck p
}

@test "project push of a git project is refused in one line: another host would get it without its history" {
  local repo=$BATS_TEST_TMPDIR/repo
  mkdir -p "$repo"
  git -C "$repo" init -q
  echo hi >"$repo/a.txt"
  git -C "$repo" add a.txt
  git -C "$repo" -c user.name=T -c user.email=t@example.org commit -qm first
  on A esbx_ok project create g --from-git "$repo"
  run on A "$ESBX" project push g
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "project push \`g\`: a git project"
  [ ! -e "$HOST_A/projects/g/remote" ]
  [ -z "$(etcd_head g)" ]
  run on B "$ESBX" project pull g
  assert_failure
}

@test "the registry's garbage-collect keeps every blob a head reaches, records too" {
  on A esbx_ok project push p
  local i
  for i in 1 2; do
    on A make_session p "a$i"
    echo "$i" >"$m/gc-$i.txt"
    on A esbx_ok publish "a$i"
  done
  # docker-registry's gc needs the registry stopped (or read-only).
  stop_registry
  run docker-registry garbage-collect --delete-untagged "$REMOTE_DIR/registry.yml"
  assert_success
  start_registry
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 3 layers fetched"
  head_tree A p "$BATS_TEST_TMPDIR/a"
  head_tree B p "$BATS_TEST_TMPDIR/b"
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  on B esbx_ok fsck p
}

@test "a registry behind TLS and basic authentication: --ca, --token-file; a wrong CA fails naming the URL" {
  command -v openssl >/dev/null || skip "openssl is not installed"
  command -v htpasswd >/dev/null || skip "htpasswd (apache2-utils) is not installed"
  local tls=$BATS_TEST_TMPDIR/tls port url h
  make_tls_certs "$tls"
  htpasswd -Bbn esbx s3cret >"$tls/htpasswd"
  echo 'esbx:s3cret' >"$tls/token"
  echo 'esbx:wrong' >"$tls/bad-token"
  port=$(free_port)
  start_tls_registry "$tls" "$port" "$tls/htpasswd"
  url="https://127.0.0.1:$port/x"
  for h in A B; do
    on "$h" esbx_ok remote set --registry "$url" --etcd "$(ETCD_URL)" \
      --ca "$tls/ca.crt" --token-file "$tls/token"
  done
  run on A "$ESBX" remote show
  assert_line "ca $tls/ca.crt"
  assert_line "token_file $tls/token"
  on A esbx_ok project push p
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 1 layer fetched"
  on B make_session p b
  echo tls >"$m/tls.txt"
  on B esbx_ok publish b
  on A make_session p a
  [ "$(cat "$m/tls.txt")" = tls ]

  new_host C
  on C esbx_ok remote set --registry "$url" --etcd "$(ETCD_URL)" \
    --ca "$tls/other-ca.crt" --token-file "$tls/token"
  run on C "$ESBX" project pull p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "https://127.0.0.1:$port"
  assert_output --partial "certificate"
  [ ! -e "$HOST_C/projects/p" ]
  on C esbx_ok remote set --registry "$url" --etcd "$(ETCD_URL)" \
    --ca "$tls/ca.crt" --token-file "$tls/bad-token"
  run on C "$ESBX" project pull p
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_output --partial "HTTP 401"
  [ ! -e "$HOST_C/projects/p" ]
  run on C "$ESBX" remote set --registry "$url" --etcd "$(ETCD_URL)" --ca "$tls/missing.crt"
  assert_failure 2
  assert_output --partial "missing.crt"
}

@test "layer blobs are gzip: digest over the compressed bytes, diff_id over the tar; pull takes both" {
  local image blob digest diff_id
  image="docker://127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER/p:head"
  on A esbx_ok remote set --registry "$(REGISTRY_URL)" --etcd "$(ETCD_URL)" --compression none
  run on A "$ESBX" remote show
  assert_line "compression none"
  on A esbx_ok project push p
  on B esbx_ok project pull p
  on B make_session p b
  echo gz >"$m/gz.txt"
  on B esbx_ok publish b
  run skopeo inspect --tls-verify=false --raw "$image"
  assert_success
  [ "$(echo "$output" | jq -r '.layers[0].mediaType')" = application/vnd.oci.image.layer.v1.tar ]
  [ "$(echo "$output" | jq -r '.layers[1].mediaType')" = application/vnd.oci.image.layer.v1.tar+gzip ]
  digest=$(echo "$output" | jq -r '.layers[1].digest')
  blob="$BATS_TEST_TMPDIR/blob"
  curl -fsS -o "$blob" "http://127.0.0.1:$REGISTRY_PORT/v2/t$BATS_TEST_NUMBER/p/blobs/$digest"
  [ "sha256:$(sha256sum <"$blob" | cut -d' ' -f1)" = "$digest" ]
  # No time in the gzip header: the same layer is the same blob.
  [ "$(od -An -tx1 -j4 -N4 "$blob" | tr -d ' ')" = 00000000 ]
  diff_id=$(skopeo inspect --tls-verify=false --config --raw "$image" | jq -r '.rootfs.diff_ids[1]')
  [ "sha256:$(gzip -dc "$blob" | sha256sum | cut -d' ' -f1)" = "$diff_id" ]
  gzip -dc "$blob" | tar -t | grep -qx 'gz.txt'

  new_host C
  run on C "$ESBX" project pull p
  assert_success
  assert_output "p: 2 layers fetched"
  on C esbx_ok fsck p
  head_tree B p "$BATS_TEST_TMPDIR/b"
  head_tree C p "$BATS_TEST_TMPDIR/c"
  diff -r "$BATS_TEST_TMPDIR/b" "$BATS_TEST_TMPDIR/c"
  [ "$(cat "$BATS_TEST_TMPDIR/c/gz.txt")" = gz ]
  # A publish from the uncompressed host on the mixed head.
  on A make_session p a
  echo plain >"$m/plain.txt"
  on A esbx_ok publish a
  on C make_session p c
  [ "$(cat "$m/plain.txt")" = plain ]
}

@test "a fork and the session it froze publish through the registry: the frozen changes once, each its own" {
  on A esbx_ok project push p
  on A make_session p s1
  echo one >"$m/one.txt"
  on A esbx_ok session fork s1 --name f1
  echo fork >"$(on A "$ESBX" session path f1)/fork.txt"
  echo two >"$m/two.txt"
  on A esbx_ok publish f1
  # The same one.txt from the frozen layer is not a conflict.
  on A esbx_ok publish s1
  on B esbx_ok project pull p
  head_tree B p "$BATS_TEST_TMPDIR/b"
  [ "$(cat "$BATS_TEST_TMPDIR/b/one.txt")" = one ]
  [ "$(cat "$BATS_TEST_TMPDIR/b/two.txt")" = two ]
  [ "$(cat "$BATS_TEST_TMPDIR/b/fork.txt")" = fork ]
  on B esbx_ok fsck p
}
