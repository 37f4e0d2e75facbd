#!/usr/bin/env bats
# Pulling a stack of several layers (docs/SCALE-OUT.md, "pull P / sync"):
# every blob is downloaded at once, verified, and the layers are installed
# all or none; gc of the layers a host caches.

load remote_helpers

setup_file() {
  setup_remote_file
}

teardown_file() {
  teardown_remote_services
}

setup() { setup_hosts_ab; }

teardown() {
  local pid
  pid=$(cat "$BATS_TEST_TMPDIR/proxy.pid" 2>/dev/null) && kill "$pid" 2>/dev/null
  teardown_hosts
}

# `publish_layers HOST N`: N more layers on HOST's project p, one file each.
publish_layers() {
  local host=$1 n=$2 i
  for i in $(seq 1 "$n"); do
    on "$host" make_session p "l$i" || return
    echo "layer $i" >"$m/f$i.txt"
    on "$host" esbx_ok publish "l$i" --discard || return
  done
}

# A proxy in front of the registry that holds every blob GET for 0.3 s
# and writes the most blob GETs it had in flight at once to
# $BATS_TEST_TMPDIR/inflight; its port in $PROXY_PORT.
start_slow_proxy() {
  PROXY_PORT=$(free_port)
  cat >"$BATS_TEST_TMPDIR/proxy.py" <<'PY'
import http.client, http.server, sys, threading, time
port, upstream, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
state = {"now": 0, "max": 0}
class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def forward(self):
        blob = self.command == "GET" and "/blobs/sha256:" in self.path
        if blob:
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
                open(out, "w").write("%d\n" % state["max"])
            time.sleep(0.3)
        try:
            c = http.client.HTTPConnection("127.0.0.1", upstream)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            c.request(self.command, self.path, headers=headers)
            r = c.getresponse()
            body = r.read()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        finally:
            if blob:
                with lock:
                    state["now"] -= 1
    do_GET = do_HEAD = forward
http.server.ThreadingHTTPServer(("127.0.0.1", port), Proxy).serve_forever()
PY
  python3 "$BATS_TEST_TMPDIR/proxy.py" "$PROXY_PORT" "$REGISTRY_PORT" "$BATS_TEST_TMPDIR/inflight" &
  echo $! >"$BATS_TEST_TMPDIR/proxy.pid"
  wait_http "http://127.0.0.1:$PROXY_PORT/v2/"
}

# The data file of the layer blob of layer INDEX of p's head.
layer_blob_file() {
  local digest
  digest=$(skopeo inspect --tls-verify=false \
    "docker://127.0.0.1:$REGISTRY_PORT/t$BATS_TEST_NUMBER/p:head" | jq -r ".Layers[$1]")
  echo "$REMOTE_DIR/registry/docker/registry/v2/blobs/sha256/${digest:7:2}/${digest#sha256:}/data"
}

@test "pull of six layers downloads their blobs at once and installs every layer" {
  publish_layers A 5
  on A esbx_ok project push p
  start_slow_proxy
  on B esbx_ok remote set --registry "http://127.0.0.1:$PROXY_PORT/t$BATS_TEST_NUMBER" \
    --etcd "$(ETCD_URL)"
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 6 layers fetched"
  # 12 blobs (a record and a layer blob each): one at a time, the proxy
  # never sees two.
  [ "$(cat "$BATS_TEST_TMPDIR/inflight")" -ge 4 ]
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  on B esbx_ok fsck p
  on B make_session p b
  [ "$(cat "$m/f1.txt")" = "layer 1" ]
  [ "$(cat "$m/f5.txt")" = "layer 5" ]
  [ -z "$(ls -A "$HOST_B/projects/p/tmp")" ]
}

@test "a corrupted blob among several: digest mismatch, no layer of the pull installed" {
  on A esbx_ok project push p
  on B esbx_ok project pull p
  publish_layers A 5
  local data
  data=$(layer_blob_file 3)
  cp "$data" "$BATS_TEST_TMPDIR/good"
  printf 'X' | dd of="$data" bs=1 seek=100 conv=notrunc status=none
  run on B "$ESBX" project pull p
  assert_failure 1
  assert_output --partial "digest mismatch"
  # Only the first layer, which was there before; the stack unchanged.
  [ "$(ls "$HOST_B/projects/p/layers" | wc -l)" -eq 1 ]
  [ "$(wc -l <"$HOST_B/projects/p/stack")" -eq 1 ]
  [ -z "$(ls -A "$HOST_B/projects/p/tmp")" ]
  [ -z "$(ls -A "$HOST_B/tmp" 2>/dev/null)" ]
  cp "$BATS_TEST_TMPDIR/good" "$data"
  run on B "$ESBX" project pull p
  assert_success
  assert_output "p: 5 layers fetched"
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  on B esbx_ok fsck p
}

@test "gc --cache drops the copy of a shared project nothing here uses; session create pulls it again" {
  on A esbx_ok project push p
  on A "$ESBX" project create q --from "$BATS_TEST_TMPDIR/src" >/dev/null
  on B esbx_ok project pull p
  # A session keeps it.
  on B make_session p s1
  on B esbx_ok gc --cache
  [ -f "$HOST_B/projects/p/stack" ]
  on B esbx_ok discard s1
  # A trash entry (unpublished work of a discarded session) keeps it.
  on B make_session p s2
  echo work >"$m/work.txt"
  on B esbx_ok discard s2
  on B esbx_ok gc --cache
  [ -f "$HOST_B/projects/p/stack" ]
  on B esbx_ok trash purge "$(on B "$ESBX" trash list --json | jq -r '.[0].entry')"
  # Plain gc keeps the cache.
  on B esbx_ok gc
  [ -f "$HOST_B/projects/p/stack" ]
  run on B "$ESBX" gc --cache
  assert_success
  assert_output --partial "removed the local copy of shared project \`p\`"
  [ ! -e "$HOST_B/projects/p" ]
  on B make_session p s3
  [ "$(cat "$m/README")" = hello ]
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  # Local projects are never dropped; the shared one on A is a cache too.
  on A esbx_ok gc --cache
  [ -f "$HOST_A/projects/q/stack" ]
  [ ! -e "$HOST_A/projects/p" ]
  on A esbx_ok project pull p
  diff "$HOST_A/projects/p/stack" "$HOST_B/projects/p/stack"
  # A project that is neither here nor in etcd is still not found.
  run on B "$ESBX" session create nosuch
  assert_failure 1
  assert_output --partial "does not exist"
}
