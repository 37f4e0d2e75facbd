# Helpers for the suites that drive a real dockerd (30-plugin, 31-plugin-restart,
# 32-compose).  Each test gets its own store root and its own esbxd, serving
# the plugin name of this bats run (dockerd finds NAME at
# /run/docker/plugins/NAME.sock).  One name per run, not per test: dockerd
# remembers every plugin it ever activated, and each one whose socket is gone
# costs ~30 s of retries in every `docker volume ls` and in every lookup of
# an unknown volume name.  For the same reason the helpers never list
# volumes through dockerd; they ask by name.  teardown_docker removes every
# container, volume, esbxd and mount a test made, pass or fail.

load helpers

ESBX_TEST_IMAGE=${ESBX_TEST_IMAGE:-esbx-test:latest}
export ESBX_TEST_IMAGE

# The pid of the dockerd the docker CLI talks to (/var/run/docker.sock): its
# pid file, not `pidof`, since other daemons (in namespaces of their own)
# may run beside it.
dockerd_pid() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null) || pid=
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    echo "$pid"
  else
    pidof -s dockerd
  fi
}

# Once per file: dockerd up, test image present.
setup_docker_file() {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  command -v docker >/dev/null || skip "docker is not installed"
  "$ESBX_SRC/hack/start-dockerd" >&3 2>&1 || skip "dockerd does not start"
  "$ESBX_SRC/hack/docker-test-image" "$ESBX_TEST_IMAGE" >/dev/null
}

# `setup_docker [ESBXD OPTIONS]`: a store and its esbxd.
# shellcheck disable=SC2120 # the default hooks pass none; 33-docker-first does
setup_docker() {
  setup_store
  DRIVER=${ESBX_TEST_DRIVER:-esbxt${BATS_ROOT_PID:-$$}}
  PLUGIN_SOCK=/run/docker/plugins/$DRIVER.sock
  ESBXD_LOG=$BATS_TEST_TMPDIR/esbxd.log
  ESBXD_PID=
  export DRIVER PLUGIN_SOCK ESBXD_LOG
  start_esbxd "$@"
}

# `start_esbxd [ESBXD OPTIONS]`
# shellcheck disable=SC2120 # most callers pass none
start_esbxd() {
  ESBXD_PID=$(ESBXD=$ESBXD "$ESBX_SRC/hack/start-esbxd" --root "$ESBX_ROOT" \
    --plugin-socket "$PLUGIN_SOCK" --log "$ESBXD_LOG" -- --gateway-socket none --metrics none "$@")
}

# SIG defaults to TERM; waits until the process is gone.
stop_esbxd() {
  local sig=${1:-TERM}
  [ -n "${ESBXD_PID:-}" ] || return 0
  kill -"$sig" "$ESBXD_PID" 2>/dev/null || true
  local i=0
  while kill -0 "$ESBXD_PID" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  ESBXD_PID=
}

teardown_docker() {
  local c v
  if [ -n "${DRIVER:-}" ]; then
    for c in $(docker ps -aq --filter "label=esbx-test=$DRIVER" 2>/dev/null); do
      docker rm -f "$c" >/dev/null 2>&1 || true
    done
    # Only names both know: dockerd forgets a volume once the plugin says it
    # does not exist, and rm of a name it does not know asks every plugin.
    for v in $(sort -u "$BATS_TEST_TMPDIR/docker-volumes" 2>/dev/null) ${EXTRA_VOLUMES:-}; do
      plugin_knows "$v" || continue
      docker volume rm -f "$v" >/dev/null 2>&1 || true
    done
  fi
  esbxd_log_if_failed "${ESBXD_LOG:-}"
  stop_esbxd TERM
  rm -f "${PLUGIN_SOCK:-/nonexistent}"
  teardown_store
}

# The default hooks of the Docker suites, in place of helpers.bash's; a suite
# that needs more defines its own after `load`.
setup_file() { setup_docker_file; }
setup() { setup_docker "$@"; }
teardown() { teardown_docker; }

# Every volume this test's esbxd has a record of, whether or not its session
# still exists.
plugin_volumes() {
  local f
  for f in "$ESBX_ROOT"/plugin/volumes/*.json; do
    [ -f "$f" ] && basename "$f" .json
  done
  return 0
}

plugin_knows() {
  [ -S "${PLUGIN_SOCK:-}" ] &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PLUGIN_SOCK" -X POST \
      -d "{\"Name\": \"$1\"}" http://plugin/VolumeDriver.Get)" = 200 ]
}

# Names of the volumes the plugin lists (VolumeDriver.List), one a line.
listed_volumes() {
  curl -s --unix-socket "$PLUGIN_SOCK" -X POST -d '{}' http://plugin/VolumeDriver.List |
    python3 -c 'import json,sys; [print(v["Name"]) for v in json.load(sys.stdin)["Volumes"]]'
}

# Remember the volume names a docker command uses, for teardown_docker.
note_volumes() {
  local prev=
  for a in "$@"; do
    case $prev in
    -v | --volume)
      case $a in /* | .*) ;; *:*) echo "${a%%:*}" >>"$BATS_TEST_TMPDIR/docker-volumes" ;; esac
      ;;
    esac
    prev=$a
  done
}

# `dvol NAME [OPTS]`, options before or after: docker volume create with the
# test's driver; the name is the last argument.
dvol() {
  docker volume create -d "$DRIVER" "$@" || return
  echo "${!#}" >>"$BATS_TEST_TMPDIR/docker-volumes"
}

# `drun ARGS` = docker run --rm with the test label and the test's driver.
drun() {
  note_volumes "$@"
  docker run --rm --label "esbx-test=$DRIVER" --volume-driver "$DRIVER" "$@"
}

# Start a long-running container: `dstart NAME ARGS...`.
dstart() {
  local name=$1
  shift
  note_volumes "$@"
  docker run -d --name "$name-$DRIVER" --label "esbx-test=$DRIVER" --volume-driver "$DRIVER" \
    "$@" >/dev/null
}

# POST a body to the plugin socket: `plugin_call ENDPOINT [BODY]`.  Sets
# $status (curl's), $output (the body) and $http_code.
plugin_call() {
  local endpoint=$1 body=${2-}
  local out
  out=$(curl -s --unix-socket "$PLUGIN_SOCK" -X POST \
    -H 'Accept: application/vnd.docker.plugins.v1.2+json' \
    --data-binary "$body" -w '\n%{http_code}' "http://plugin/$endpoint")
  status=$?
  http_code=${out##*$'\n'}
  output=${out%$'\n'*}
}

merged_of() {
  echo "$ESBX_ROOT/sessions/$1/merged"
}

is_mounted() {
  mountpoint -q "$(merged_of "$1")"
}

# A project with a small tree, for volumes to start from.
make_project() {
  local name=${1:-demo}
  make_tree "$BATS_TEST_TMPDIR/tree-$name"
  esbx_ok project create "$name" --from "$BATS_TEST_TMPDIR/tree-$name"
}
