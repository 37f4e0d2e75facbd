#!/usr/bin/env python3
"""Share a project the way esbx pushed it before records went into
configs (80-remote.bats): each layer's record a blob of its own, named by
the annotation io.esbx.record and kept by an artifact manifest tagged
ID-record; layers as plain OCI tars.

  old_layout_push.py REGISTRY_URL ETCD_URL PROJECT DIR

DIR holds, for the stack's layers bottom to top, ID.record (the layer's
record.json) and ID.tar (`esbx export P@ID --format oci-layer`), and the
file `stack` (the ids, one per line).  The head goes into etcd as esbx
writes it; the manifest of the top layer is tagged `head` too.
"""
import base64
import hashlib
import json
import os
import sys
import urllib.parse
import urllib.request

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
RECORD = "application/vnd.esbx.layer.record.v1+json"


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def request(method, url, body=None, ctype=None):
    r = urllib.request.Request(url, data=body, method=method)
    if ctype:
        r.add_header("Content-Type", ctype)
    with urllib.request.urlopen(r) as answer:
        return answer.headers, answer.read()


def main():
    registry, etcd, project, d = sys.argv[1:5]
    u = urllib.parse.urlsplit(registry)
    base, repo = "%s://%s" % (u.scheme, u.netloc), u.path.strip("/") + "/" + project

    def blob(data):
        headers, _ = request("POST", "%s/v2/%s/blobs/uploads/" % (base, repo), b"")
        loc = urllib.parse.urljoin(base, headers["Location"])
        digest = sha(data)
        request("PUT", loc + ("&" if "?" in loc else "?") + "digest=" + digest, data,
                "application/octet-stream")
        return {"digest": digest, "size": len(data)}

    def manifest(tag, body):
        request("PUT", "%s/v2/%s/manifests/%s" % (base, repo, tag), body, OCI_MANIFEST)

    with open(os.path.join(d, "stack")) as f:
        ids = f.read().split()
    layers, diff_ids = [], []
    for i in ids:
        with open(os.path.join(d, i + ".record"), "rb") as f:
            record = f.read()
        with open(os.path.join(d, i + ".tar"), "rb") as f:
            tar = f.read()
        lb, rb = blob(tar), blob(record)
        manifest(i + "-record", json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": RECORD, **rb}, "layers": [],
            "annotations": {"io.esbx.layer": i}}).encode())
        layers.append({"mediaType": OCI_LAYER, **lb,
                       "annotations": {"io.esbx.layer": i, "io.esbx.record": rb["digest"]}})
        diff_ids.append(lb["digest"])
        config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                             "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
        top = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                          "config": {"mediaType": OCI_CONFIG, **blob(config)},
                          "layers": layers}).encode()
        manifest(i, top)
    manifest("head", top)
    key = base64.b64encode(("esbx/projects/%s/head" % project).encode()).decode()
    value = json.dumps({"layers": ids, "manifest": sha(top)}).encode()
    request("POST", etcd + "/v3/kv/put",
            json.dumps({"key": key, "value": base64.b64encode(value).decode()}).encode(),
            "application/json")


if __name__ == "__main__":
    sys.exit(main())
