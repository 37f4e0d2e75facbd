#!/usr/bin/env bats
# The operator's dashboard in a real browser: esbxd serves /ui/ on its TCP
# listener, headless chromium (Debian's) driven by puppeteer-core
# (tests/ui/, installed by hack/install-ui-deps) logs in, sees a running
# swarm, opens a diff, approves a pending request and sees it land;
# hostile names, contents, labels and messages are shown, never run; a
# cross-site page cannot reject a request.  Screenshots go to
# $ESBX_TEST_ARTIFACTS (default: the test's own directory).

load gateway_helpers
bats_require_minimum_version 1.5.0

setup() {
  [ -x /usr/bin/chromium ] || skip "chromium not installed (hack/install-ui-deps installs it)"
  [ -d "$ESBX_SRC/tests/ui/node_modules/puppeteer-core" ] ||
    skip "puppeteer-core not installed in tests/ui (hack/install-ui-deps)"
  UI_PORT=$(free_port)
  export ESBXD_SAMPLE_INTERVAL_MS=300
  setup_gateway --gateway-tcp "127.0.0.1:$UI_PORT" --gateway-tcp-insecure
  make_tree "$BATS_TEST_TMPDIR/src"
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/src"
}

@test "the dashboard in headless chromium: swarm, session diff, queue approve, history; hostile content stays text; no cross-site request" {
  esbx_ok project gate p --mode review --approvals 1
  # A swarm: two agents running something, one with hostile content.
  esbx_ok session create p --name agent1 --label 'role=<script>window.__xss=1</script>'
  esbx_ok session create p --name agent2 --label 'note="onerror=window.__xss=4 x="'
  esbx_ok session create p --name agent3
  esbx_ok exec agent1 --detach -- sleep 300
  esbx_ok exec agent2 --detach -- sh -c 'while :; do :; done'
  esbx_ok exec agent2 -- sh -c 'echo "\033[31mred\033[0m"; exit 3' || true
  local m2
  m2=$(path_of agent2)
  printf '<script>window.__xss = 3</script>\n\033[31mred\033[0m and "onerror=alert(1)\n' >"$m2/hostile.html"
  : >"$m2/<img src=x onerror=window.__xss=2>.txt"
  head -c 10000000 /dev/zero | tr '\0' 'x' >"$m2/long.txt"
  printf 'int main (void) { return 1; }\n' >"$m2/src/main.c"
  # Two requests waiting for review: one to approve, one a cross-site page
  # tries to reject.
  echo work >"$(path_of agent1)/agent-work.txt"
  local admin obs r1 r2
  admin=$(token manage,runtime,observe)
  obs=$(token observe)
  gw_expect 200 POST /v1/sessions/agent1/publish "$(token manage --project p)" \
    '{"message": "<img src=x onerror=alert(1)> \u001b[31mred"}'
  r1=$(json_field request <<<"$output")
  echo more >"$(path_of agent3)/more.txt"
  run -5 "$ESBX" --json publish agent3 -m '"><script>window.__xss=5</script>'
  r2=$(json_field request <<<"$output")
  mkdir -p "${ESBX_TEST_ARTIFACTS:-$BATS_TEST_TMPDIR/artifacts}"
  run env ESBX_UI="http://127.0.0.1:$UI_PORT" ESBX_TOKEN="$admin" ESBX_OBSERVE_TOKEN="$obs" \
    ESBX_SESSIONS="agent1 agent2 agent3" ESBX_HOSTILE=agent2 ESBX_REQUEST="$r1" ESBX_REQUEST2="$r2" \
    ARTIFACTS="${ESBX_TEST_ARTIFACTS:-$BATS_TEST_TMPDIR/artifacts}" \
    timeout 300 node "$ESBX_SRC/tests/ui/dashboard.js"
  echo "$output"
  assert_success
  assert_output --partial "0 failed"
  [ -s "${ESBX_TEST_ARTIFACTS:-$BATS_TEST_TMPDIR/artifacts}/dashboard.png" ]
  # The approval is the token's, in the layer record.
  [ "$("$ESBX" --json queue show "$r1" | json_field state)" = landed ]
  [ "$("$ESBX" --json queue show "$r2" | json_field state)" = review ]
}
