#!/usr/bin/env python3
"""A registry token server for the tests (83-remote-token.bats).

It answers GET /token?service=S&scope=SCOPE... the way distribution's token
authentication expects (docs/SCALE-OUT.md): basic credentials are checked
against the users file (lines `user:password:actions`, actions such as
`pull` or `pull,push`; no credentials: anonymous, granted nothing), each
`repository:NAME:ACTIONS` scope is granted the actions the user has, and the
answer is a JWT signed RS256 with --key whose header carries --cert as `x5c`
(the registry checks it against its `rootcertbundle`).  Signing uses
openssl's CLI.  Every request is logged to --log as one line.
"""
import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(key, data):
    return subprocess.run(["openssl", "dgst", "-sha256", "-sign", key],
                          input=data, capture_output=True, check=True).stdout


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log(self, user, scopes, granted, status):
        with open(self.server.opts.log, "a") as f:
            f.write("user=%s scope=%s granted=%s status=%d\n"
                    % (user, "+".join(scopes) or "-", "+".join(granted) or "-", status))

    def do_GET(self):
        opts = self.server.opts
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        scopes = [s for v in query.get("scope", []) for s in v.split(" ") if s]
        if url.path != "/token" or query.get("service") != [opts.service]:
            self.log("-", scopes, [], 400)
            return self.answer(400, {"errors": [{"code": "INVALID", "message": "bad service"}]})
        user, actions = "anonymous", set()
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            name, _, password = base64.b64decode(header[6:]).decode().partition(":")
            entry = self.server.users.get(name)
            if entry is None or entry[0] != password:
                self.log(name, scopes, [], 401)
                return self.answer(401, {"errors": [{"code": "UNAUTHORIZED",
                                                     "message": "invalid credentials"}]})
            user, actions = name, entry[1]
        access, granted = [], []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, wanted = rest.rpartition(":")
            allowed = [a for a in wanted.split(",") if a in actions]
            if kind == "repository" and name:
                access.append({"type": kind, "name": name, "actions": allowed})
                granted.append("%s:%s:%s" % (kind, name, ",".join(allowed)))
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.server.cert_b64]}
        claims = {"iss": opts.issuer, "sub": user, "aud": opts.service, "exp": now + opts.expires_in,
                  "nbf": now - 1, "iat": now, "jti": b64url(os.urandom(12)), "access": access}
        signed = "%s.%s" % (b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode()))
        token = "%s.%s" % (signed, b64url(sign(opts.key, signed.encode())))
        self.log(user, scopes, granted, 200)
        self.answer(200, {opts.field: token, "expires_in": opts.expires_in,
                          "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--service", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--users", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--field", default="token", choices=["token", "access_token"])
    p.add_argument("--expires-in", type=int, default=300)
    opts = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.opts = opts
    server.users = {}
    with open(opts.users) as f:
        for line in f:
            name, password, actions = line.strip().split(":")
            server.users[name] = (password, set(actions.split(",")))
    with open(opts.cert) as f:
        server.cert_b64 = base64.b64encode(ssl.PEM_cert_to_DER_cert(f.read())).decode()
    if opts.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
