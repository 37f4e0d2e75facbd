#!/usr/bin/env bats
# esbxd as a Docker volume plugin: the protocol straight on the socket, then
# the same through a real dockerd.

load docker_helpers

assert_err() {
  local code=$1 pattern=$2
  [ "$http_code" = "$code" ] || { echo "HTTP $http_code, wanted $code: $output"; return 1; }
  local err
  err=$(json_field Err <<<"$output")
  [ -n "$err" ] || { echo "empty Err in $output"; return 1; }
  [[ "$err" == *"$pattern"* ]] || { echo "Err '$err' does not mention '$pattern'"; return 1; }
}

@test "plugin: Activate, Capabilities and an empty List" {
  plugin_call Plugin.Activate
  assert_equal "$http_code" 200
  assert_equal "$(json_field Implements <<<"$output")" '["VolumeDriver"]'

  plugin_call VolumeDriver.Capabilities '{}'
  assert_equal "$(json_field Capabilities.Scope <<<"$output")" local

  plugin_call VolumeDriver.List '{}'
  assert_equal "$(json_field Volumes <<<"$output")" '[]'

  run curl -s -D - -o /dev/null --unix-socket "$PLUGIN_SOCK" -X POST http://plugin/Plugin.Activate
  assert_output --partial 'application/vnd.docker.plugins.v1.2+json'
}

@test "plugin: malformed JSON gets a clear Err and changes nothing" {
  make_project demo
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": '
  assert_err 400 "invalid JSON"
  plugin_call VolumeDriver.Create '["v1"]'
  assert_err 400 "JSON object"
  run "$ESBX" session list
  refute_output --partial v1
}

@test "plugin: a body over 1 MiB is refused" {
  head -c $((1024 * 1024 + 10)) /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/big"
  # curl reads the body from the file named after @.
  plugin_call VolumeDriver.Create "@$BATS_TEST_TMPDIR/big"
  assert_err 413 "too large"

  # Without Content-Length the limit holds while the body streams in.
  out=$(curl -s --unix-socket "$PLUGIN_SOCK" -X POST -H 'Transfer-Encoding: chunked' \
    --data-binary "@$BATS_TEST_TMPDIR/big" -w '\n%{http_code}' http://plugin/VolumeDriver.Create)
  http_code=${out##*$'\n'} output=${out%$'\n'*}
  assert_err 413 "too large"

  # The server is still there.
  plugin_call VolumeDriver.Capabilities '{}'
  assert_equal "$http_code" 200
}

@test "plugin: unknown endpoint and wrong method" {
  plugin_call VolumeDriver.Frobnicate '{}'
  assert_err 404 "VolumeDriver.Frobnicate"
  run curl -s --unix-socket "$PLUGIN_SOCK" http://plugin/VolumeDriver.List
  assert_output --partial '"Err"'
  assert_output --partial 'POST'
}

@test "plugin: Create names what is wrong: project, name, option" {
  make_project demo
  plugin_call VolumeDriver.Create '{"Name": "v1"}'
  assert_err 400 "no project"
  assert_err 400 "--default-project"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {}}'
  assert_err 400 "project"
  plugin_call VolumeDriver.Create '{"Name": "-bad/name", "Opts": {"project": "demo"}}'
  assert_err 400 '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$'
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "colour": "red"}}'
  assert_err 400 "unknown option \`colour\`"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "network": "bridge"}}'
  assert_err 400 "network"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "nope"}}'
  assert_err 400 "project \`nope\` does not exist"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "from": "relative/dir"}}'
  assert_err 400 "absolute"

  run "$ESBX" session list
  refute_output --partial v1
  run dvol -o project=demo -o colour=red v1
  assert_failure
  assert_output --partial "unknown option \`colour\`"
}

@test "plugin: -o env.KEY=VALUE is the session's env; a bad key is refused, nothing made" {
  make_project demo
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "env.1X": "y"}}'
  assert_err 400 "\`1X\`"
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "env.": "y"}}'
  assert_err 400 "unknown option"
  run "$ESBX" session list
  refute_output --partial v1
  run dvol -o project=demo -o env.GREETING=hi -o "env.SPACED=a b" v2
  assert_success
  esbx_ok --json session inspect v2
  jq -e '.env == {"GREETING": "hi", "SPACED": "a b"}' <<<"$output"
  esbx_ok exec v2 -- sh -c 'echo "$GREETING $SPACED"'
  assert_output "hi a b"
  # Adopting a session made with the CLI: its env must match.
  esbx_ok session create demo --name v3 --env GREETING=hi
  run dvol -o project=demo -o env.GREETING=other v3
  assert_failure
  assert_output --partial "GREETING=other"
}

@test "docker volume create -o secret=NAME: the value on the session's /run/secrets and env, redacted" {
  make_project demo
  printf 'docker-secret-5e6f7a8b\n' | "$ESBX" secret create dtok
  run dvol -o project=demo -o secret=dtok,env=DTOK,file=/run/secrets/dtok v1
  assert_success
  esbx_ok exec v1 -- sh -c 'cat /run/secrets/dtok; echo; echo "$DTOK"'
  assert_line --index 0 "***dtok***"
  assert_line --index 1 "***dtok***"
  # The container sees the volume's files, never the secret: it lives on
  # the holder's private tmpfs, not in the session's upper directory.
  run drun -v v1:/w "$ESBX_TEST_IMAGE" sh -c 'grep -r docker-secret /w; ls /w'
  refute_output --partial docker-secret
  run grep -rF docker-secret "$ESBX_ROOT/sessions/v1"
  assert_failure
  run dvol -o project=demo -o secret=nope v2
  assert_failure
  assert_output --partial "secret \`nope\` does not exist"
}

@test "plugin: Get never invents a volume" {
  plugin_call VolumeDriver.Get '{"Name": "ghost"}'
  assert_err 404 "volume \`ghost\` does not exist"
  plugin_call VolumeDriver.Path '{"Name": "ghost"}'
  assert_err 404 "does not exist"
  assert_file_not_exists "$ESBX_ROOT/plugin/volumes/ghost.json"
  # Through dockerd: a volume it knows but the plugin does not.  (An unknown
  # name would make dockerd ask every plugin it ever saw.)
  make_project demo
  dvol -o project=demo ghost >/dev/null
  esbx_ok discard ghost
  run docker volume inspect ghost
  assert_failure
  assert_output --partial "no such volume"
}

@test "plugin: Create is idempotent for the same options, an error for others" {
  make_project demo
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "label.team": "blue"}}'
  assert_equal "$http_code" 200
  assert_equal "$(json_field Err <<<"$output")" ""
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"label.team": "blue", "project": "demo"}}'
  assert_equal "$http_code" 200
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "label.team": "red"}}'
  assert_err 400 "already exists with other options"

  # dockerd asks Get first and keeps the existing volume.
  run dvol -o project=demo -o label.team=blue v1
  assert_success
  run listed_volumes
  assert_output v1
}

@test "plugin: inspect shows RFC 3339 CreatedAt and the session's status" {
  make_project demo
  run dvol -o project=demo -o label.team=blue v1
  assert_success
  run docker volume inspect v1
  assert_success
  json=$(json_field 0 <<<"$output")
  [[ "$(json_field CreatedAt <<<"$json")" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2} ]]
  assert_equal "$(json_field Status.project <<<"$json")" demo
  head=$(json_field Status.head <<<"$json")
  [ -n "$head" ]
  assert_equal "$(json_field Status.base <<<"$json")" "$head"
  assert_equal "$(json_field Status.changes <<<"$json")" 0
  assert_equal "$(json_field Status.holder <<<"$json")" ""
  [ -n "$(json_field Status.upper_size <<<"$json")" ]

  plugin_call VolumeDriver.List '{}'
  assert_equal "$(json_field Volumes.0.Name <<<"$output")" v1
}

@test "docker run writes into the session; the project head does not change" {
  make_project demo
  dvol -o project=demo s1 >/dev/null
  drun -v s1:/work "$ESBX_TEST_IMAGE" sh -c 'echo x > /work/new && cat /work/README'

  esbx_ok diff s1 --json
  assert_equal "$(json_field 0.path <<<"$output")" /new
  assert_equal "$(json_field 0.kind <<<"$output")" added
  # Nothing was published: a fresh volume of the project starts without it.
  dvol -o project=demo s2 >/dev/null
  run drun -v s2:/work "$ESBX_TEST_IMAGE" sh -c 'test ! -e /work/new && cat /work/README'
  assert_success
  assert_output hello
  run find "$ESBX_ROOT/projects/demo" -name new
  assert_output ""
  # The last user left: the merged view is unmounted again.
  run is_mounted s1
  assert_failure
}

@test "a session made with the CLI is used by name with --volume-driver" {
  make_project demo
  esbx_ok session create demo --name s1
  drun -v s1:/work "$ESBX_TEST_IMAGE" sh -c 'echo y > /work/fromdocker'
  esbx_ok diff s1 --json
  assert_output --partial /fromdocker
  run listed_volumes
  assert_output s1
}

@test "two volumes are isolated; disjoint publishes land; an overlapping one is rejected" {
  make_project demo
  for v in vol-a vol-b vol-c; do dvol -o project=demo "$v" >/dev/null; done
  drun -v vol-a:/work "$ESBX_TEST_IMAGE" sh -c 'echo from-a > /work/a.txt'
  drun -v vol-b:/work "$ESBX_TEST_IMAGE" sh -c 'echo from-b > /work/b.txt'
  drun -v vol-c:/work "$ESBX_TEST_IMAGE" sh -c 'echo from-c > /work/a.txt'
  run drun -v vol-b:/work "$ESBX_TEST_IMAGE" sh -c 'test ! -e /work/a.txt && cat /work/b.txt'
  assert_success
  assert_output from-b

  esbx_ok session list
  assert_output --partial vol-a
  assert_output --partial vol-b
  layers_before=$(wc -l <"$ESBX_ROOT/projects/demo/stack")
  esbx_ok publish vol-a
  esbx_ok publish vol-b
  assert_equal "$(wc -l <"$ESBX_ROOT/projects/demo/stack")" $((layers_before + 2))

  esbx_fails 3 publish vol-c
  assert_output --partial /a.txt
  assert_equal "$(wc -l <"$ESBX_ROOT/projects/demo/stack")" $((layers_before + 2))
  esbx_ok diff vol-c --json
  assert_output --partial /a.txt
  run drun -v vol-c:/work "$ESBX_TEST_IMAGE" cat /work/a.txt
  assert_output from-c
}

@test "Mount IDs are counted: the volume stays mounted until its last user stops" {
  make_project demo
  dvol -o project=demo vol >/dev/null
  dstart one -v vol:/work "$ESBX_TEST_IMAGE" sleep 1000
  dstart two -v vol:/work "$ESBX_TEST_IMAGE" sleep 1000
  is_mounted vol
  mounts() { json_field mounts <"$ESBX_ROOT/plugin/volumes/vol.json"; }
  assert_equal "$(python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))' <<<"$(mounts)")" 2

  # docker cp mounts again with an ID that is already mounted.
  echo copied >"$BATS_TEST_TMPDIR/file"
  docker cp "$BATS_TEST_TMPDIR/file" "one-$DRIVER:/work/copied"
  run docker exec "two-$DRIVER" cat /work/copied
  assert_output copied
  assert_equal "$(python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))' <<<"$(mounts)")" 2

  docker stop -t 0 "one-$DRIVER" >/dev/null
  is_mounted vol
  run docker exec "two-$DRIVER" cat /work/copied
  assert_output copied
  assert_equal "$(python3 -c 'import json,sys; print(sum(json.load(sys.stdin).values()))' <<<"$(mounts)")" 1

  docker stop -t 0 "two-$DRIVER" >/dev/null
  run is_mounted vol
  assert_failure
  assert_equal "$(mounts)" '{}'

  docker start "one-$DRIVER" >/dev/null
  run docker exec "one-$DRIVER" cat /work/copied
  assert_output copied
}

@test "docker volume rm discards the session" {
  make_project demo
  dvol -o project=demo vol >/dev/null
  drun -v vol:/work "$ESBX_TEST_IMAGE" sh -c 'echo x > /work/x'
  run docker volume rm vol
  assert_success
  esbx_ok session list
  refute_output --partial vol
  assert_file_not_exists "$ESBX_ROOT/sessions/vol"
  assert_file_not_exists "$ESBX_ROOT/plugin/volumes/vol.json"
  plugin_call VolumeDriver.Get '{"Name": "vol"}'
  assert_err 404 "does not exist"
}

@test "docker volume rm keeps unpublished work in the trash, restorable; esbxd logs the count" {
  make_project demo
  dvol -o project=demo vol >/dev/null
  drun -v vol:/work "$ESBX_TEST_IMAGE" sh -c 'echo x > /work/x && echo y > /work/y'
  run docker volume rm vol
  assert_success
  grep -q "warning: discard \`vol\`: 2 unpublished changes kept in the trash as \`vol\." "$ESBXD_LOG"
  esbx_ok --json trash list
  assert_equal "$(json_field 0.session <<<"$output")" vol
  assert_equal "$(json_field 0.changes <<<"$output")" 2
  entry=$(json_field 0.entry <<<"$output")
  esbx_ok trash restore "$entry"
  assert_output vol
  [ "$(cat "$("$ESBX" session path vol)/x")" = x ]
  esbx_ok discard --force vol
}

@test "a volume discarded with the CLI is gone for docker too" {
  make_project demo
  dvol -o project=demo vol >/dev/null
  esbx_ok discard vol
  plugin_call VolumeDriver.Get '{"Name": "vol"}'
  assert_err 404 "does not exist"
  plugin_call VolumeDriver.List '{}'
  assert_equal "$(json_field Volumes <<<"$output")" '[]'
  run listed_volumes
  assert_output ""
  run docker volume rm -f vol
  assert_success
  assert_file_not_exists "$ESBX_ROOT/plugin/volumes/vol.json"
}

@test "from=PATH creates the project on first use" {
  make_tree "$BATS_TEST_TMPDIR/src"
  dvol -o project=fresh -o "from=$BATS_TEST_TMPDIR/src" v1 >/dev/null
  dvol -o project=fresh -o "from=$BATS_TEST_TMPDIR/src" v2 >/dev/null
  esbx_ok project list
  assert_output --partial fresh
  run drun -v v1:/work "$ESBX_TEST_IMAGE" cat /work/src/main.c
  assert_output 'int main (void) { return 0; }'
}

@test "a slow request does not hold up the others" {
  # A Create whose body is still arriving occupies one connection.
  (
    sleep 3
    echo '{}'
  ) | curl -s --unix-socket "$PLUGIN_SOCK" -X POST -H 'Transfer-Encoding: chunked' \
    --data-binary @- http://plugin/VolumeDriver.Create >/dev/null &
  slow=$!
  sleep 0.3
  start=$(date +%s%N)
  plugin_call VolumeDriver.Capabilities '{}'
  elapsed=$((($(date +%s%N) - start) / 1000000))
  wait "$slow" || true
  assert_equal "$http_code" 200
  [ "$elapsed" -lt 2000 ] || { echo "Capabilities took ${elapsed}ms"; false; }
}

@test "esbxd logs one line per request and refuses a second instance" {
  make_project demo
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo"}}'
  plugin_call VolumeDriver.Get '{"Name": "nope"}'
  run cat "$ESBXD_LOG"
  assert_line --regexp '^esbxd: POST /VolumeDriver.Create volume=v1 status=200 result=ok [0-9.]+ms$'
  assert_line --regexp '^esbxd: POST /VolumeDriver.Get volume=nope status=404 result=volume `nope` does not exist [0-9.]+ms$'

  run "$ESBXD" --root "$ESBX_ROOT" --plugin-socket "$BATS_TEST_TMPDIR/other.sock"
  assert_failure
  assert_output --partial "another esbxd"
  run "$ESBXD" --root "$BATS_TEST_TMPDIR/other" --plugin-socket "$PLUGIN_SOCK"
  assert_failure
  assert_output --partial "in use"
  run "$ESBXD" --no-such-option
  assert_failure 2
}

@test "docker volume create -o snapshot=SNAP starts from the snapshot's files" {
  make_project demo
  esbx_ok session create demo --name src
  echo from-snapshot >"$(path_of src)/snap.txt"
  esbx_ok session snapshot src --name snap
  plugin_call VolumeDriver.Create '{"Name": "v1", "Opts": {"project": "demo", "snapshot": "nosuch"}}'
  assert_err 404 "snapshot \`nosuch\`"
  dvol -o project=demo -o snapshot=snap fromsnap >/dev/null
  run drun -v fromsnap:/work "$ESBX_TEST_IMAGE" cat /work/snap.txt
  assert_success
  assert_output from-snapshot
  esbx_ok --json session inspect fromsnap
  echo "$output" | jq -e '.snapshot == "snap"'
}
