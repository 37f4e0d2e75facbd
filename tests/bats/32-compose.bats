#!/usr/bin/env bats
# contrib/compose/agent-swarm.yml end to end with Debian's docker-compose 1.29.

load docker_helpers

setup_file() {
  setup_docker_file
  command -v docker-compose >/dev/null || skip "docker-compose is not installed"
}

setup() {
  setup_docker
  COMPOSE_FILE=$ESBX_SRC/contrib/compose/agent-swarm.yml
  COMPOSE_PROJECT_NAME=c$DRIVER
  ESBX_IMAGE=$ESBX_TEST_IMAGE
  ESBX_DRIVER=$DRIVER
  export COMPOSE_FILE COMPOSE_PROJECT_NAME ESBX_IMAGE ESBX_DRIVER
}

teardown() {
  docker-compose down -v -t 0 >/dev/null 2>&1 || true
  teardown_docker
}

@test "compose: three agents in their own sessions, publish, down -v leaves none" {
  make_project demo
  layers_before=$(wc -l <"$ESBX_ROOT/projects/demo/stack")

  run docker-compose up --no-color
  assert_success
  run docker-compose ps -q
  for c in $output; do
    assert_equal "$(docker inspect -f '{{.State.ExitCode}}' "$c")" 0
  done

  esbx_ok session list
  for n in 1 2 3; do
    assert_output --partial "${COMPOSE_PROJECT_NAME}_agent$n-ws"
  done
  esbx_ok diff "${COMPOSE_PROJECT_NAME}_agent1-ws" --json
  assert_output --partial /src/feature1.txt
  refute_output --partial /docs/feature2.md
  esbx_ok diff "${COMPOSE_PROJECT_NAME}_agent3-ws" --json
  assert_output --partial /README

  # The publish step of the stack: disjoint files, three layers.
  for n in 1 2 3; do
    esbx_ok publish "${COMPOSE_PROJECT_NAME}_agent$n-ws" -m "agent $n"
  done
  assert_equal "$(wc -l <"$ESBX_ROOT/projects/demo/stack")" $((layers_before + 3))

  # A second `up` reuses the volumes (same options): Create stays idempotent.
  run docker-compose up --no-color
  assert_success

  run docker-compose down -v
  assert_success
  esbx_ok --json session list
  assert_output "[]"
  run listed_volumes
  assert_output ""
  run grep -F "$ESBX_ROOT/sessions" /proc/self/mountinfo
  assert_failure
}
