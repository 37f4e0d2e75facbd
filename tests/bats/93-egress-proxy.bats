#!/usr/bin/env bats
# The store's egress proxy: credentials put into requests for the hosts
# they are bound to and never given to the session, HTTP rules, the SNI
# check, the kernel rules underneath, the store's CA.  The "internet" is
# api_inet_helpers.bash's, on 198.19.234.0/24: HTTPS APIs on .2 (api.test,
# git.test) and .3 (other.test), HTTP on .2:80 (plain.test), a DNS server
# on .2 for those names.

load helpers
load api_inet_helpers

INET=198.19.234

setup_file() { api_inet_up "$INET" "esbxt-px-$$" "esbxt-q$$"; }

teardown_file() { api_inet_down; }

setup() {
  setup_project
  api_inet_upstream
  api_token
}

teardown() { teardown_store; }

proxy_pid() {
  local f p
  for f in /run/esbx/egress/proxy/*/ports.json; do
    [ "$(jq -r .store "$f" 2>/dev/null)" = "$ESBX_ROOT" ] || continue
    p=$(jq -r .pid "$f")
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--store $ESBX_ROOT " && echo "$p"
  done
  return 0
}

@test "inject: the API receives the token; the session holds only a placeholder (env, file, environ, memory, logs)" {
  api_secret
  esbx_ok session create p --name s1 --network egress --allow api.test:443 --allow other.test:443 \
    --secret api,inject,env=API_TOKEN,file=/run/secrets/api
  esbx_ok exec s1 -- curl -fsS -m 5 https://api.test/v1/user
  assert_output --partial '"/v1/user"'
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.authorization == $t'
  # The session's copy is a placeholder, the same in env and file.
  esbx_ok exec s1 -- printenv API_TOKEN
  ph=$output
  [[ $ph == esbx-placeholder-* ]]
  esbx_ok exec s1 -- cat /run/secrets/api
  [ "$output" = "$ph" ]
  # Sent by the session itself, the placeholder arrives as the value.
  esbx_ok exec s1 -- sh -c 'curl -fsS -m 5 -H "Authorization: Bearer $API_TOKEN" https://api.test/v1/again'
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.authorization == $t'
  # Nowhere in the session: environ, files it can read.
  esbx_ok exec s1 -- cat /proc/self/environ
  assert_output --partial "$ph"
  refute_output --partial "$TOKEN"
  esbx_fails 1 exec s1 -- grep -rsF "$TOKEN" /run /tmp /etc /root /home /workspace /proc/self/environ
  # Nor in the memory of a process that called the API with it (what a
  # core dump would hold): another process reads it.
  esbx_ok exec --detach s1 -- python3 -c '
import os, time, urllib.request
r = urllib.request.Request("https://api.test/v1/mem",
                           headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
urllib.request.urlopen(r, timeout=5).read()
open("/tmp/called", "w").close()
time.sleep(60)'
  for _ in $(seq 50); do "$ESBX" exec s1 -- test -e /tmp/called && break; sleep 0.2; done
  # gVisor keeps /proc/PID/mem of another command closed: read it in the
  # other tiers.
  if [ "${ESBX_TEST_ISOLATION:-}" != gvisor ]; then
    esbx_ok exec s1 -- python3 -c '
import os, re, sys
ph, tok = sys.argv[1].encode(), bytes.fromhex(sys.argv[2])
pid = [p for p in os.listdir("/proc") if p.isdigit() and b"/v1/mem" in open("/proc/%s/cmdline" % p, "rb").read()][0]
found = {"ph": 0, "tok": 0}
with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m:
            continue
        a, b = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(a)
            chunk = mem.read(b - a)
        except (OSError, ValueError, OverflowError):
            continue
        found["ph"] += chunk.count(ph)
        found["tok"] += chunk.count(tok)
print("placeholder seen %d, token seen %d" % (found["ph"], found["tok"]))
' "$ph" "$(printf '%s' "$TOKEN" | od -An -tx1 | tr -d ' \n')"
    assert_output --regexp "placeholder seen [1-9][0-9]*, token seen 0"
  fi
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.path == "/v1/mem" and .authorization == $t'
  # Reversed or encoded, the placeholder reveals nothing.
  esbx_ok exec s1 -- sh -c 'echo "$API_TOKEN" | rev; echo "$API_TOKEN" | base64; cat /run/secrets/api | rev'
  refute_output --partial "$TOKEN"
  refute_output --partial "$(printf '%s' "$TOKEN" | rev)"
  refute_output --partial "$(printf '%s' "$TOKEN" | base64)"
  # Nor in what the host keeps of the session: logs, events, inspect.
  run grep -rsF "$TOKEN" "$ESBX_ROOT/sessions/s1" /run/esbx/egress
  assert_failure
  esbx_ok events s1 --json
  refute_output --partial "$TOKEN"
  echo "$output" | jq -se 'any(.type == "egress.request" and .host == "api.test" and .secrets == "api" and .intercepted)'
  esbx_ok session inspect s1
  refute_output --partial "$TOKEN"
}

@test "inject: a second allowed host gets no value, and a request carrying the placeholder there is refused" {
  api_secret
  esbx_ok session create p --name s1 --network egress --allow api.test:443 --allow other.test:443 \
    --secret api,inject,env=API_TOKEN
  esbx_ok exec s1 -- curl -fsS -m 5 https://other.test/plain
  received other.test | tail -1 | jq -e '.path == "/plain" and .authorization == ""'
  # The placeholder in a header, in Basic credentials, in the query: refused
  # before anything reaches the host.
  run "$ESBX" exec s1 -- sh -c 'curl -fsS -m 5 -H "Authorization: Bearer $API_TOKEN" https://other.test/h'
  assert_failure
  run "$ESBX" exec s1 -- sh -c 'curl -fsS -m 5 -u "me:$API_TOKEN" https://other.test/b'
  assert_failure
  run "$ESBX" exec s1 -- sh -c 'curl -fsS -m 5 "https://other.test/q?token=$API_TOKEN"'
  assert_failure
  run "$ESBX" exec s1 -- sh -c 'curl -fsS -m 5 -H "X-Token: $API_TOKEN" http://other.test:443/x'
  assert_failure
  run received other.test
  refute_output --partial '"/h"'
  refute_output --partial '"/b"'
  refute_output --partial '/q?'
  refute_output --partial "$TOKEN"
  esbx_ok events s1 --json
  echo "$output" | jq -se '[.[] | select(.type == "egress.request" and .host == "other.test" and .verdict == "refused" and (.reason | test("secret")))] | length >= 3'
}

@test "inject: git clones over https with the token in its URL, node calls the API, a query form" {
  printf 'gh%s' "$TOKEN" >"$BATS_TEST_TMPDIR/ghtoken"
  esbx_ok secret create gh --from-file "$BATS_TEST_TMPDIR/ghtoken" --for git.test --basic x-access-token
  api_secret
  printf 'q%s' "$TOKEN" >"$BATS_TEST_TMPDIR/qtoken"
  esbx_ok secret create qk --from-file "$BATS_TEST_TMPDIR/qtoken" --for other.test --query key
  esbx_ok session create p --name s1 --network egress --allow git.test:443 --allow api.test:443 \
    --allow other.test:443 --secret gh,inject,env=GH_TOKEN --secret api,inject,env=API_TOKEN \
    --secret qk,inject,env=QK
  esbx_ok exec s1 -- sh -c 'git clone -q "https://x-access-token:$GH_TOKEN@git.test/git/repo.git" /tmp/r && cat /tmp/r/f'
  assert_output hi
  want=$(printf 'x-access-token:gh%s' "$TOKEN" | base64 -w0)
  received git.test | jq -se --arg a "Basic $want" 'map(select(.authorization != "")) | length > 0 and all(.authorization == $a)'
  # The clone's .git/config keeps the URL it was given: the placeholder.
  esbx_fails 1 exec s1 -- grep -rF "gh$TOKEN" /tmp/r/.git
  esbx_ok exec s1 -- node -e '
const http = require("http"), tls = require("tls");
const p = new URL(process.env.HTTPS_PROXY);
http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: "api.test:443" })
  .on("connect", (res, sock) => {
    const t = tls.connect({ socket: sock, servername: "api.test" }, () =>
      t.write("GET /v1/node HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " +
              process.env.API_TOKEN + "\r\nConnection: close\r\n\r\n"));
    let d = "";
    t.on("data", (c) => (d += c));
    t.on("end", () => console.log(d.split("\r\n")[0]));
  }).end();'
  assert_output --partial "200"
  received api.test | tail -1 | jq -e --arg t "Bearer $TOKEN" '.path == "/v1/node" and .authorization == $t'
  esbx_ok exec s1 -- curl -fsS -m 5 "https://other.test/search?q=1"
  received other.test | tail -1 | jq -e --arg k "q$TOKEN" '.path == "/search?key=" + $k + "&q=1"'
}

@test "HTTP rules: methods and path prefixes per host, over TLS and plain HTTP; egress check says the same" {
  esbx_ok session create p --name s1 --network egress --allow 'api.test:443 GET,HEAD /v1/*' \
    --allow 'GET plain.test/pub/*'
  esbx_ok exec s1 -- curl -fsS -m 5 https://api.test/v1/list
  run "$ESBX" exec s1 -- curl -fsS -m 5 -X POST -d x https://api.test/v1/list
  assert_failure
  run "$ESBX" exec s1 -- curl -fsS -m 5 https://api.test/admin
  assert_failure
  esbx_ok exec s1 -- curl -fsS -m 5 http://plain.test/pub/a
  run "$ESBX" exec s1 -- curl -fsS -m 5 -X POST -d x http://plain.test/pub/a
  assert_failure
  run "$ESBX" exec s1 -- curl -fsS -m 5 http://plain.test/private
  assert_failure
  run received api.test
  refute_output --partial '"POST"'
  refute_output --partial '/admin'
  run received plain.test
  refute_output --partial '"POST"'
  refute_output --partial '/private'
  esbx_ok session inspect s1
  echo "$output" | jq -e '.egress.requests | any(.host == "api.test" and .method == "POST" and .verdict == "refused" and .status == 403)'
  echo "$output" | jq -e '.egress.requests | any(.host == "api.test" and .method == "GET" and .path == "/v1/list" and .status == 200 and .received > 0)'
  # The dry run.
  esbx_ok egress check s1 https://api.test/v1/list
  assert_output --partial allowed
  esbx_ok egress check s1 https://api.test/v1/list --json
  echo "$output" | jq -e '.allowed and .intercepted and .rule == "api.test:443 GET,HEAD /v1/*"'
  esbx_fails 1 egress check s1 https://api.test/v1/list --method POST
  assert_output --partial refused
  esbx_fails 1 egress check s1 http://plain.test/private
  esbx_fails 1 egress check s1 https://elsewhere.test/
  esbx_fails 2 egress check s1 ftp://api.test/
  # Bad rules are refused and change nothing.
  esbx_fails 2 session create p --name s2 --network egress --allow 'api.test GET /a*b'
  esbx_fails 2 session create p --name s2 --network egress --allow 'GET POST'
  esbx_fails 2 session create p --name s2 --network egress --allow 'a.test b.test'
  run "$ESBX" session list
  refute_output --partial s2
}

@test "kernel rules underneath: straight to an allowed name's address is refused; CONNECT to an address literal or with another SNI is refused" {
  esbx_ok session create p --name s1 --network egress --allow api.test:443 --allow other.test:443
  # The tunnel, not intercepted (no secret, no HTTP rule): the session
  # sees the API's own certificate, of the test's CA.
  esbx_ok exec s1 -- sh -c 'curl -sS -m 5 https://api.test/ 2>&1; true'
  assert_output --partial "certificate"
  "$ESBX" exec s1 -- sh -c 'cat >/tmp/ca.pem' <"$BATS_FILE_TMPDIR/ca.pem"
  esbx_ok exec s1 -- curl -fsS -m 5 --cacert /tmp/ca.pem https://api.test/ok
  run "$ESBX" exec s1 -- curl -fsS -m 5 --noproxy '*' https://api.test/direct
  assert_failure
  run "$ESBX" exec s1 -- curl -fsS -m 5 -k "https://$INET.2/literal"
  assert_failure
  run "$ESBX" exec s1 -- curl -fsS -m 5 --connect-to api.test:443:other.test:443 https://api.test/fronted
  assert_failure
  run "$ESBX" exec s1 -- curl -fsS -m 5 https://git.test/other
  assert_failure
  run received api.test
  refute_output --partial /direct
  refute_output --partial /fronted
  run jq -r .path "$BATS_FILE_TMPDIR/api.log"
  refute_output --partial /literal
  refute_output --partial /other
  esbx_ok session inspect s1
  echo "$output" | jq -e --arg d "$INET.2" '.egress.refused | any(.destination == $d and .port == 443)'
  echo "$output" | jq -e --arg d "$INET.2" '.egress.requests | any(.host == $d and .method == "CONNECT" and .verdict == "refused")'
  echo "$output" | jq -e '.egress.requests | any(.host == "other.test" and .verdict == "refused" and (.reason | test("server name")))'
  echo "$output" | jq -e '.egress.requests | any(.host == "git.test" and .verdict == "refused")'
}

@test "the store's CA: its key is 0600 in the store and out of every session's reach; its certificate is in the session's trust" {
  esbx_ok session create p --name s1 --network egress --allow api.test:443
  esbx_ok exec s1 -- true
  [ "$(stat -c %a "$ESBX_ROOT/egress/ca.key")" = 600 ]
  [ "$(stat -c %a "$ESBX_ROOT/egress")" = 700 ]
  run "$ESBX" exec s1 -- cat "$ESBX_ROOT/egress/ca.key"
  assert_failure
  line=$(sed -n 2p "$ESBX_ROOT/egress/ca.key")
  [ -n "$line" ]
  esbx_fails 1 exec s1 -- grep -rsF -- "$line" /run /tmp /etc /root /home /workspace
  esbx_fails 1 exec s1 -- grep -F "PRIVATE KEY" /etc/ssl/certs/ca-certificates.crt
  esbx_ok exec s1 -- cat /etc/ssl/certs/ca-certificates.crt
  assert_output --partial "$(sed -n 2p "$ESBX_ROOT/egress/ca.crt")"
  # The same CA across the store's proxies: made once.
  crt=$(sha256sum <"$ESBX_ROOT/egress/ca.crt")
  kill -9 "$(proxy_pid)"
  esbx_ok exec s1 -- true
  [ "$(sha256sum <"$ESBX_ROOT/egress/ca.crt")" = "$crt" ]
}

@test "the proxy: one for the store, outlives the command that started it, comes back on its ports when killed" {
  esbx_ok session create p --name s1 --network egress --allow plain.test:80
  esbx_ok session create p --name s2 --network egress --allow plain.test:80
  esbx_ok exec s1 -- curl -fsS -m 5 http://plain.test/one
  esbx_ok exec s2 -- curl -fsS -m 5 http://plain.test/two
  pid=$(proxy_pid)
  [ -n "$pid" ]
  [ "$(echo "$pid" | wc -l)" = 1 ]
  [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = 1 ] || [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" != "$$" ]
  port=$(jq .http /run/esbx/egress/proxy/*/ports.json | head -1)
  kill -9 "$pid"
  wait_gone "$pid"
  esbx_ok exec s1 -- curl -fsS -m 5 http://plain.test/three
  new=$(proxy_pid)
  [ -n "$new" ]
  [ "$new" != "$pid" ]
  f=$(grep -l "\"$ESBX_ROOT\"" /run/esbx/egress/proxy/*/ports.json)
  [ "$(jq .http "$f")" = "$port" ] || [ "$(jq .http "$f")" != 0 ]
  esbx_ok exec s2 -- curl -fsS -m 5 http://plain.test/four
  esbx_ok discard s1 --force
  esbx_ok discard s2 --force
  wait_gone "$new" 20
  # Its directory goes with it, locks and all (a store's left one each).
  [ ! -e "/run/esbx/egress/proxy/$(printf %s "$ESBX_ROOT" | sha256sum | cut -c1-16)" ]
}

@test "bad secret bindings are refused and change nothing" {
  esbx_fails 2 secret create a --from-file "$BATS_TEST_TMPDIR/token" --header 'Authorization: Bearer {}'
  esbx_fails 2 secret create a --from-file "$BATS_TEST_TMPDIR/token" --for api.test --header 'Authorization: Bearer'
  esbx_fails 2 secret create a --from-file "$BATS_TEST_TMPDIR/token" --for 10.0.0.1
  esbx_fails 2 secret create a --from-file "$BATS_TEST_TMPDIR/token" --for api.test --basic u --query k
  esbx_fails 2 secret create a --from-file "$BATS_TEST_TMPDIR/token" --for 'api.test:443'
  run "$ESBX" secret list
  refute_output --partial "a	"
  esbx_ok secret create plain --from-file "$BATS_TEST_TMPDIR/token"
  esbx_fails 2 session create p --name s1 --network egress --secret plain,inject
  assert_output --partial "bound to no host"
  api_secret
  esbx_ok secret list --json
  echo "$output" | jq -e '.[] | select(.name == "api") | .inject.for == ["api.test"] and .inject.header == "Authorization: Bearer {}"'
  refute_output --partial "$TOKEN"
}

@test "through the gateway: esbxd starts the store's proxy for the sessions it runs; the request log and the dry run" {
  gw=$BATS_TEST_TMPDIR/gw.sock
  pid=$("$ESBX_SRC/hack/start-esbxd" --root "$ESBX_ROOT" --plugin-socket "$BATS_TEST_TMPDIR/plugin.sock" \
    --log "$BATS_TEST_TMPDIR/esbxd.log" -- --gateway-socket "$gw" --metrics none)
  tok=$("$ESBX" token create --scope manage,runtime,observe)
  remote() { env ESBX_HOST="unix://$gw" ESBX_TOKEN="$tok" "$ESBX" "$@"; }
  run remote session create p --name s1 --network egress --allow 'GET plain.test/pub/*'
  assert_success
  run remote exec s1 -- curl -fsS -m 5 http://plain.test/pub/gw
  assert_success
  [ -n "$(proxy_pid)" ]
  run remote session inspect s1
  assert_success
  echo "$output" | jq -e '.egress.requests | any(.method == "GET" and .path == "/pub/gw" and .status == 200)'
  run remote egress check s1 http://plain.test/pub/x
  assert_success
  assert_output --partial allowed
  run remote egress check s1 http://plain.test/private --json
  assert_failure
  assert_output --partial '"allowed": false'
  # The proxy is not esbxd's to take along: esbxd gone, the session still
  # goes out.
  kill "$pid"
  wait_gone "$pid" 20
  esbx_ok exec s1 -- curl -fsS -m 5 http://plain.test/pub/after
}
