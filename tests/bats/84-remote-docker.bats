#!/usr/bin/env bats
# A shared project's head is an image (docs/SCALE-OUT.md, "Registry
# layout"): a real dockerd pulls the tag `head` that esbx pushed to a real
# docker-registry on 127.0.0.1 and runs it.  The project is a busybox
# rootfs (the test image's, exported), so the head has a shell to run.
# Uses dockerd: runs with the other Docker suites, never beside them.

load remote_helpers

setup_file() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed"
  command -v etcd >/dev/null || skip "etcd is not installed"
  command -v docker >/dev/null || skip "docker is not installed"
  "$ESBX_SRC/hack/start-dockerd" >&3 2>&1 || skip "dockerd does not start"
  "$ESBX_SRC/hack/docker-test-image" esbx-test:latest >/dev/null
  setup_remote_services
}

teardown_file() {
  teardown_remote_services
}

setup() {
  remote_services_up
  IMAGE=127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER/p
  new_host A
  new_host B
  local c
  c=$(docker create esbx-test:latest true)
  docker export "$c" >"$BATS_TEST_TMPDIR/rootfs.tar"
  docker rm "$c" >/dev/null
  on A "$ESBX" project create p --from "$BATS_TEST_TMPDIR/rootfs.tar" >/dev/null
}

teardown() {
  docker image rm -f "$IMAGE:head" "$IMAGE:second" >/dev/null 2>&1 || true
  teardown_hosts
}

@test "docker pull of the head runs the project's history as an image" {
  on A make_session p s1
  echo "from esbx" >"$m/hello.txt"
  mkdir -p "$m/srv/app"
  echo one >"$m/srv/app/config"
  rm "$m/bin/vi"
  on A esbx_ok publish s1 -m "hello"
  on A esbx_ok project push p

  run docker pull "$IMAGE:head"
  assert_success
  run docker run --rm "$IMAGE:head" cat /hello.txt
  assert_success
  assert_output "from esbx"
  # The deletion is an OCI whiteout: gone in the image too.
  run docker run --rm "$IMAGE:head" sh -c 'test -e /bin/vi && echo present || echo absent'
  assert_output "absent"
  run docker run --rm "$IMAGE:head" cat /srv/app/config
  assert_output "one"
  # One image layer per esbx layer, each named in the history.
  run docker image inspect -f '{{len .RootFS.Layers}}' "$IMAGE:head"
  assert_output "2"
  run docker history --no-trunc --format '{{.CreatedBy}}' "$IMAGE:head"
  assert_line "esbx layer $(tail -n1 "$HOST_A/projects/p/stack")"
}

@test "a publish from another host moves the tag: docker pull sees the new head" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  on B make_session p s1
  echo two >"$m/hello.txt"
  mkdir -p "$m/srv"
  : >"$m/srv/.keep"
  rm -r "${m:?}/usr"
  on B esbx_ok publish s1
  on A make_session p s2
  echo three >"$m/other.txt"
  on A esbx_ok publish s2

  run docker pull "$IMAGE:head"
  assert_success
  run docker run --rm "$IMAGE:head" sh -c 'cat /hello.txt /other.txt; ls -d /usr 2>/dev/null || echo no-usr'
  assert_line "two"
  assert_line "three"
  assert_line "no-usr"
  # Every layer is a tag of its own: B's layer alone, before A's.
  local id
  id=$(sed -n 2p "$HOST_B/projects/p/stack")
  run docker pull "$IMAGE:$id"
  assert_success
  docker tag "$IMAGE:$id" "$IMAGE:second"
  run docker run --rm "$IMAGE:second" sh -c 'cat /hello.txt; test -e /other.txt || echo no-other'
  assert_line "two"
  assert_line "no-other"
  docker image rm -f "$IMAGE:$id" >/dev/null
}
