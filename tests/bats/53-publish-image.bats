#!/usr/bin/env bats
# The esbx-publish helper image: built offline by hack/publish-image, run by
# `docker run` and by the compose stack's publish step against a test esbxd.

load gateway_helpers

setup_file() {
  command -v docker >/dev/null || skip "docker is not installed"
  "$ESBX_SRC/hack/start-dockerd" >&3 2>&1 || skip "dockerd does not start"
  PUBLISH_IMAGE=esbx/publish:bats-$$
  export PUBLISH_IMAGE
  ESBX_BUILD=$ESBX_BUILD "$ESBX_SRC/hack/publish-image" "$PUBLISH_IMAGE" >/dev/null
}

teardown_file() {
  # The tag is this run's own: nothing else uses it.
  [ -n "${PUBLISH_IMAGE:-}" ] && docker rmi -f "$PUBLISH_IMAGE" >/dev/null 2>&1 || true
}

setup() {
  # A plugin name of its own: `docker-compose run` creates the stack's
  # volumes, so dockerd must find this esbxd as their driver.
  GW_DRIVER=esbxpub$$n${BATS_TEST_NUMBER}
  GW_PLUGIN_SOCK=/run/docker/plugins/$GW_DRIVER.sock
  export GW_DRIVER GW_PLUGIN_SOCK
  setup_gateway
  make_tree "$BATS_TEST_TMPDIR/tree"
  esbx_ok project create demo --from "$BATS_TEST_TMPDIR/tree"
  for s in a b c; do esbx_ok session create demo --name "$s"; done
  echo "from a" >"$ESBX_ROOT/sessions/a/merged/README"
  echo "from b" >"$ESBX_ROOT/sessions/b/merged/README"
  echo "new" >"$ESBX_ROOT/sessions/c/merged/c.txt"
}

teardown() {
  [ -n "${COMPOSE_FILE:-}" ] && docker-compose down -v -t 0 >/dev/null 2>&1 || true
  for v in $(docker volume ls -q --filter "driver=$GW_DRIVER" 2>/dev/null); do
    docker volume rm -f "$v" >/dev/null 2>&1 || true
  done
  for c in $(docker ps -aq --filter "label=esbx-test=publish-$$" 2>/dev/null); do
    docker rm -f "$c" >/dev/null 2>&1 || true
  done
  teardown_gateway
}

publish_run() {
  docker run --rm --label "esbx-test=publish-$$" --network none \
    -v "$GW_SOCK:/run/esbx/gateway.sock" -e ESBX_TOKEN="$1" "$PUBLISH_IMAGE" "${@:2}"
}

@test "publish image: a disjoint session publishes (0, layer id); an overlapping one exits 3" {
  t=$(token manage --project demo)
  run publish_run "$t" a -m "agent a"
  assert_success
  layer=$output
  [[ "$layer" =~ ^[0-9a-f]{16}$ ]]
  run "$ESBX" project log demo
  assert_output --partial "$layer"
  assert_output --partial "agent a"

  run publish_run "$t" c
  assert_success

  before=$(cat "$ESBX_ROOT/projects/demo/stack")
  run publish_run "$t" b
  assert_equal "$status" 3
  assert_output --partial "conflict: /README (layer $layer, session a)"
  assert_equal "$(cat "$ESBX_ROOT/projects/demo/stack")" "$before"
}

@test "publish image: a token for another session or without manage is refused" {
  before=$(cat "$ESBX_ROOT/projects/demo/stack")
  run publish_run "$(token manage --session c)" a
  assert_equal "$status" 1
  assert_output --partial "limited to session"
  run publish_run "$(token observe)" a
  assert_equal "$status" 1
  assert_output --partial "lacks the \`manage\` scope"
  run publish_run esbx_nope a
  assert_equal "$status" 1
  assert_equal "$(cat "$ESBX_ROOT/projects/demo/stack")" "$before"
}

@test "publish image: the compose stack's publish step" {
  command -v docker-compose >/dev/null || skip "docker-compose is not installed"
  export ESBX_TOKEN=$(token manage --project demo)
  export ESBX_PUBLISH_IMAGE=$PUBLISH_IMAGE ESBX_GATEWAY_SOCKET=$GW_SOCK
  export COMPOSE_FILE=$ESBX_SRC/contrib/compose/agent-swarm.yml COMPOSE_PROJECT_NAME=pub$$
  export ESBX_DRIVER=$GW_DRIVER
  # The stack's volumes exist before compose looks them up: dockerd asks
  # every volume driver it has ever seen about a name it does not know,
  # and each plugin of an earlier test that is gone costs ~30 s of retries.
  for v in agent1-ws agent2-ws agent3-ws; do
    docker volume create -d "$GW_DRIVER" -o project=demo "pub$$_$v" >/dev/null
  done
  run docker-compose run -T --rm -l "esbx-test=publish-$$" publish a -m "compose a"
  assert_success
  assert_output --regexp '[0-9a-f]{16}'
  run docker-compose run -T --rm -l "esbx-test=publish-$$" publish b
  assert_equal "$status" 3
  assert_output --partial "conflict: /README"
}

@test "a git project through Docker: a container with git commits on a session volume; the publish container lands the commit" {
  local image
  image=$("$ESBX_SRC/hack/docker-test-image" --git)
  local repo=$BATS_TEST_TMPDIR/repo
  mkdir -p "$repo"
  git -C "$repo" init -q -b master
  printf 'one\n' >"$repo/f1"
  git -C "$repo" add f1
  git -C "$repo" -c user.name=T -c user.email=t@example.org commit -qm first
  esbx_ok project create gitp --from-git "$repo"
  run docker run --rm --label "esbx-test=publish-$$" --network none --volume-driver "$GW_DRIVER" \
    -v gitp.w1:/work "$image" sh -c 'cd /work && git status --porcelain && echo two >>f1 &&
      git -c user.name=Container -c user.email=c@example.org commit -qam "from a container" &&
      git log --format=%s'
  assert_success
  assert_line --index 0 "from a container"
  t=$(token manage --project gitp)
  run publish_run "$t" gitp.w1
  assert_success
  git clone -q -b esbx/head "$("$ESBX" project git-dir gitp)" "$BATS_TEST_TMPDIR/clone"
  run git -C "$BATS_TEST_TMPDIR/clone" log --format='%an %s'
  assert_line --index 0 "Container from a container"
  git -C "$BATS_TEST_TMPDIR/clone" fsck --strict
  run cat "$BATS_TEST_TMPDIR/clone/f1"
  assert_output "$(printf 'one\ntwo')"
}
