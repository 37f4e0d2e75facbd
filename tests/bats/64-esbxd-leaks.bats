#!/usr/bin/env bats
# esbxd under valgrind memcheck (issue 7): 1,000 plugin requests (volume
# lifecycles with real sessions and mounts, reads, and bad requests of every
# kind), then SIGTERM: memcheck reports no error and no definitely or
# indirectly lost block.

load docker_helpers

setup_file() {
  [ -x "$ESBXD" ] || skip "esbxd not built at $ESBXD"
  command -v valgrind >/dev/null || skip "valgrind is not installed"
}

setup() {
  setup_store
  DRIVER=esbxleak$$n${BATS_TEST_NUMBER}
  PLUGIN_SOCK=/run/docker/plugins/$DRIVER.sock
  ESBXD_LOG=$BATS_TEST_TMPDIR/esbxd.log
  VG_LOG=$BATS_TEST_TMPDIR/valgrind.log
  cat >"$BATS_TEST_TMPDIR/esbxd-vg" <<EOS
#!/bin/sh
exec valgrind --quiet --child-silent-after-fork=yes --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite,indirect --track-fds=no --log-file="$VG_LOG" "$ESBXD" "\$@"
EOS
  chmod +x "$BATS_TEST_TMPDIR/esbxd-vg"
  ESBXD_PID=$(ESBXD=$BATS_TEST_TMPDIR/esbxd-vg "$ESBX_SRC/hack/start-esbxd" --root "$ESBX_ROOT" \
    --plugin-socket "$PLUGIN_SOCK" --log "$ESBXD_LOG")
  make_project demo
}

teardown() {
  stop_esbxd KILL
  rm -f "${PLUGIN_SOCK:-/nonexistent}"
  teardown_store
}

# Requests are batched into one curl process per 40 (`--next`).
batch=()
req() {
  batch+=(--unix-socket "$PLUGIN_SOCK" -X POST -H 'Accept: application/vnd.docker.plugins.v1.2+json' -o /dev/null
    -w '%{http_code}\n' --data-binary "$2" "http://plugin/$1" --next)
  sent=$((sent + 1))
  [ ${#batch[@]} -lt 500 ] || flush
}
flush() {
  [ ${#batch[@]} -gt 0 ] || return 0
  unset 'batch[${#batch[@]}-1]' # the last --next
  curl -s "${batch[@]}" >>"$BATS_TEST_TMPDIR/codes" || true
  batch=()
}

@test "esbxd leaks nothing over 1,000 requests (valgrind memcheck)" {
  local i v sent=0
  # 30 volume lifecycles with real sessions and mounts: 210 requests.
  for i in $(seq 1 30); do
    v=leak$i
    req VolumeDriver.Create "{\"Name\":\"$v\",\"Opts\":{\"project\":\"demo\",\"label.n\":\"$i\"}}"
    req VolumeDriver.Mount "{\"Name\":\"$v\",\"ID\":\"m$i\"}"
    req VolumeDriver.Path "{\"Name\":\"$v\"}"
    req VolumeDriver.Get "{\"Name\":\"$v\"}"
    req VolumeDriver.List ""
    req VolumeDriver.Unmount "{\"Name\":\"$v\",\"ID\":\"m$i\"}"
    [ $((i % 3)) -eq 0 ] && req VolumeDriver.Create "{\"Name\":\"$v\",\"Opts\":{\"project\":\"other\"}}"
    req VolumeDriver.Remove "{\"Name\":\"$v\"}"
  done
  # Reads and refusals until 1,000.
  while [ $sent -lt 1000 ]; do
    case $((sent % 10)) in
    0) req Plugin.Activate "" ;;
    1) req VolumeDriver.Capabilities "" ;;
    2) req VolumeDriver.Get '{"Name":"ghost"}' ;;
    3) req VolumeDriver.Create '{"Name":"bad/name"}' ;;
    4) req VolumeDriver.Create '{"Name":"x","Opts":{"colour":"red"}}' ;;
    5) req VolumeDriver.Mount '{"Name":"ghost","ID":"1"}' ;;
    6) req VolumeDriver.Path '{"Name":' ;;
    7) req VolumeDriver.Nope '{}' ;;
    8) req VolumeDriver.Unmount '{"Name":"ghost"}' ;;
    9) req VolumeDriver.List '[1,2,3]' ;;
    esac
  done
  flush
  assert_equal "$(wc -l <"$BATS_TEST_TMPDIR/codes")" "$sent"
  [ "$sent" -ge 1000 ]
  # The lifecycles all succeeded.
  run grep -c '^200$' "$BATS_TEST_TMPDIR/codes"
  [ "$output" -ge 200 ] || fail "only $output requests answered 200: $(sort "$BATS_TEST_TMPDIR/codes" | uniq -c | tr "\n" " ")"

  local pid=$ESBXD_PID
  kill -TERM "$pid"
  for i in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || fail "esbxd did not stop on SIGTERM"
  ESBXD_PID=
  # valgrind does not know fsopen (syscall 430) and warns about it: esbxd
  # then mounts with mount(2) in a child, which is silenced here.  Errors
  # and lost blocks are lines of the form ==PID== ... .
  echo "# $sent requests, $(grep -c '^200$' "$BATS_TEST_TMPDIR/codes") answered 200" >&3
  if grep -qE '^==[0-9]+== ' "$VG_LOG"; then
    grep -E '^==[0-9]+== ' "$VG_LOG" | head -n 80
    false
  fi
}
