#!/usr/bin/env python3
"""A hostile registry and etcd in one server (86-remote-hostile.bats).

  hostile_remote.py serve PORT DIR
      answers every request from DIR/routes.json (read again for every
      request, so a test may change it while the server runs) and appends
      one JSON line per request to DIR/requests.log: method, path, the
      header lines as received, the bytes of the answer sent and whether
      the client took all of them.

  hostile_remote.py craft DIR --record FILE --layer FILE --repo R [options]
      writes DIR/routes.json for a pull of the one-layer project whose
      record.json and OCI layer tar (esbx export --format oci-layer) are
      given: the etcd head, the manifest, the record (a blob of its own, as
      esbx pushed it before records went into configs, or with
      --record-in config in the config) and the layer blob, all with
      matching digests, then changed as the options say (every option keeps
      the digests matching unless it is about the digest itself).

A route is {"method", "path" (or "prefix"), "status", "headers", and the
body: "body" (text), "file", or "gen": {"head", "repeat", "count", "tail",
"forever"} (HEAD + REPEAT * COUNT + TAIL, or HEAD then REPEAT without end,
sent chunked, until the client hangs up or 60 s have passed)}.  A route
with "auth": true answers 401 with a Bearer challenge of realm
http://127.0.0.1:PORT/token unless the request has an Authorization
header.  Unknown requests get 404.
"""
import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def route(self):
        with open(os.path.join(self.server.dir, "routes.json")) as f:
            routes = json.load(f)["routes"]
        path = self.path.split("?")[0]
        for r in routes:
            if r.get("method", self.command) != self.command:
                continue
            if r.get("path") == path or ("prefix" in r and path.startswith(r["prefix"])):
                return r
        return None

    def record(self, sent, done):
        entry = {"method": self.command, "path": self.path,
                 "headers": [[k, v] for k, v in self.headers.items()],
                 "sent": sent, "done": done, "time": time.time()}
        with LOCK, open(os.path.join(self.server.dir, "requests.log"), "a") as f:
            f.write(json.dumps(entry) + "\n")

    def handle_one(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().strip() or b"0", 16)
                self.rfile.read(n + 2)
                if n == 0:
                    break
        r = self.route()
        sent, done = 0, False
        try:
            if r is None:
                r = {"status": 404, "body": '{"errors":[{"code":"NOT_FOUND","message":"no route"}]}'}
            if r.get("auth") and not self.headers.get("Authorization"):
                port = self.server.server_address[1]
                r = {"status": 401, "body": "{}", "headers": {
                    "WWW-Authenticate": 'Bearer realm="http://127.0.0.1:%d/token",'
                                        'service="hostile",scope="repository:x/p:pull"' % port}}
            self.send_response(r.get("status", 200))
            for k, v in r.get("headers", {}).items():
                self.send_header(k, v)
            gen = r.get("gen")
            if gen is None:
                if "file" in r:
                    with open(r["file"], "rb") as f:
                        data = f.read()
                else:
                    data = r.get("body", "").encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                    sent = len(data)
                done = True
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(b):
                nonlocal sent
                if b:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                    sent += len(b)

            chunk(gen.get("head", "").encode())
            rep = gen.get("repeat", "").encode()
            block = rep * max(1, 65536 // max(1, len(rep)))
            if gen.get("forever"):
                end = time.time() + 60
                while time.time() < end:
                    chunk(block)
                    if gen.get("interval"):
                        self.wfile.flush()
                        time.sleep(gen["interval"])
                return
            left = gen.get("count", 0) * len(rep)
            while left > 0:
                chunk(block[:left])
                left -= min(left, len(block))
            chunk(gen.get("tail", "").encode())
            self.wfile.write(b"0\r\n\r\n")
            done = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.record(sent, done)
            if not done:
                self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def make_tar(entries):
    """A tar of ENTRIES: [{"name", "type": file|dir|symlink|hardlink,
    "target", "data"}], names written as given."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            info = tarfile.TarInfo(e["name"])
            info.mtime = 1700000000
            kind = e.get("type", "file")
            data = e.get("data", "").encode()
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e["target"]
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, e["target"]
            else:
                info.mode, info.size = 0o644, len(data)
            t.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return out.getvalue()


def craft(a):
    d = a.dir
    # "@FILE": the value is FILE's content (too large for an argument).
    for k in ("head", "record_raw", "manifest_raw", "config_raw"):
        v = getattr(a, k)
        if v is not None and v.startswith("@"):
            with open(v[1:]) as f:
                setattr(a, k, f.read())
    with open(a.record, "rb") as f:
        record_bytes = f.read()
    record = json.loads(record_bytes)
    if a.record_changes is not None:
        record["changes"] = json.loads(a.record_changes)
        record_bytes = json.dumps(record, indent=4).encode()
    if a.record_raw is not None:
        record_bytes = a.record_raw.encode()
    if a.tar is not None:
        layer = make_tar(json.loads(a.tar))
    else:
        with open(a.layer, "rb") as f:
            layer = f.read()
    layer_digest = sha(layer)
    config = {"rootfs": {"type": "layers", "diff_ids": [layer_digest]}}
    if a.record_in == "config":
        config["io.esbx.record"] = record_bytes.decode()
    config = json.dumps(config).encode()
    if a.config_raw is not None:
        config = a.config_raw.encode()
    if a.record_in == "config":
        # The record's blob is the config; the manifest names it twice.
        record_bytes, annot = config, "io.esbx.record-config"
    else:
        annot = "io.esbx.record"
    files = {"record": record_bytes, "layer": layer, "config": config}
    record_digest = sha(record_bytes)
    desc = {"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer),
            "annotations": {"io.esbx.layer": record["id"], annot: record_digest}}
    for kv in a.annot:
        k, v = kv.split("=", 1)
        desc["annotations"][k] = v
    if a.layer_digest is not None:
        desc["digest"] = a.layer_digest
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": sha(config), "size": len(config)},
                "layers": [desc] * a.layers}
    manifest_bytes = json.dumps(manifest).encode()
    if a.manifest_raw is not None:
        manifest_bytes = a.manifest_raw.encode()
    if a.manifest_pad:
        # Valid JSON of that many bytes: the manifest with trailing spaces.
        manifest_bytes += b" " * max(0, a.manifest_pad - len(manifest_bytes))
    files["manifest"] = manifest_bytes
    manifest_digest = sha(manifest_bytes)
    head = a.head if a.head is not None else json.dumps(
        {"layers": [record["id"]], "manifest": manifest_digest})
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    repo = "/v2/" + a.repo
    kv = {"key": b64("esbx/projects/p/head"), "value": b64(head),
          "create_revision": "5", "mod_revision": "5", "version": "1"}
    routes = [
        {"method": "POST", "path": "/v3/kv/range",
         "body": json.dumps({"header": {"revision": "5"}, "kvs": [kv], "count": "1"})},
        {"method": "GET", "path": "%s/manifests/%s" % (repo, manifest_digest),
         "headers": {"Content-Type": OCI_MANIFEST}, "file": os.path.join(d, "manifest")},
        {"method": "GET", "path": "%s/blobs/%s" % (repo, record_digest),
         "file": os.path.join(d, "record")},
        {"method": "GET", "path": "%s/blobs/%s" % (repo, layer_digest),
         "file": os.path.join(d, "layer")},
    ]
    if a.manifest_gen is not None:
        routes[1] = {"method": "GET", "prefix": repo + "/manifests/",
                     "gen": json.loads(a.manifest_gen)}
    for r in a.route:
        if r.startswith("@"):
            with open(r[1:]) as f:
                r = f.read()
        routes.insert(0, json.loads(r))
    if a.auth:
        for r in routes:
            if r.get("path", r.get("prefix", "")).startswith("/v2/"):
                r["auth"] = True
        routes.append({"method": "GET", "path": "/token", **json.loads(a.auth)})
    with open(os.path.join(d, "routes.json"), "w") as f:
        json.dump({"routes": routes, "head": head, "manifest": manifest_digest,
                   "record": record_digest, "layer": layer_digest}, f)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("dir")
    c = sub.add_parser("craft")
    c.add_argument("dir")
    c.add_argument("--record", required=True)
    c.add_argument("--layer", required=True)
    c.add_argument("--repo", default="x/p")
    c.add_argument("--head", help="the etcd value as it is")
    c.add_argument("--record-changes", help="JSON: the record's change list")
    c.add_argument("--record-raw", help="the record blob as it is")
    c.add_argument("--record-in", choices=("blob", "config"), default="blob",
                   help="where the record is: a blob of its own or the config")
    c.add_argument("--config-raw", help="the config blob as it is")
    c.add_argument("--tar", help="JSON: the layer tar's entries (make_tar)")
    c.add_argument("--annot", action="append", default=[], help="KEY=VALUE of the layer")
    c.add_argument("--layer-digest", help="the layer descriptor's digest field")
    c.add_argument("--layers", type=int, default=1, help="copies of the layer descriptor")
    c.add_argument("--manifest-raw", help="the manifest as it is")
    c.add_argument("--manifest-pad", type=int, default=0, help="pad the manifest to N bytes")
    c.add_argument("--manifest-gen", help="JSON: a generated answer to every manifest GET")
    c.add_argument("--route", action="append", default=[], help="JSON: a route to add first")
    c.add_argument("--auth", help="JSON: the route of the token realm; blobs ask for a token")
    a = p.parse_args()
    if a.cmd == "craft":
        return craft(a)
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.dir = a.dir
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
