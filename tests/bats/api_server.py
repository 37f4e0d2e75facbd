#!/usr/bin/env python3
"""An HTTPS (or HTTP) API for the egress proxy tests, in the test's own
network namespace.

    api_server.py LOG ADDR:PORT[:CERT:KEY] [GITROOT]

Answers every request with a JSON object naming its method and path, and
appends one JSON line per request to LOG: host, method, path, the
Authorization and X-Token headers as received (this server stands for the
API a credential is for: what it receives is what the test checks).
Under /git/ it serves the repositories of GITROOT through `git
http-backend`, asking for Basic credentials first as a forge does.  Stops
by itself after 300 seconds or 5,000 requests.
"""
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import sys
import threading

LOG, BIND = sys.argv[1], sys.argv[2]
GITROOT = sys.argv[3] if len(sys.argv) > 3 else None
LIFETIME, MAX_REQUESTS = 300, 5000
lock = threading.Lock()
served = 0


def read_body(h):
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                h.rfile.readline()
                return out
            out += h.rfile.read(size)
            h.rfile.readline()
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, body):
        global served
        with lock:
            served += 1
            with open(LOG, "a") as f:
                f.write(json.dumps({
                    "host": self.headers.get("Host", ""),
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization", ""),
                    "x_token": self.headers.get("X-Token", ""),
                    "body": body[:200].decode("utf-8", "replace"),
                }) + "\n")
            if served >= MAX_REQUESTS:
                threading.Thread(target=self.server.shutdown).start()

    def handle_any(self):
        body = read_body(self)
        self.record(body)
        if GITROOT and self.path.startswith("/git/"):
            return self.git(body)
        out = json.dumps({"ok": True, "method": self.command, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def git(self, body):
        if not self.headers.get("Authorization"):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path[len("/git"):].partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=GITROOT, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_USER="git")
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = handle_any


class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        # Not HTTPServer's: it asks the resolver for the address's name,
        # which no resolver in the test's namespace answers.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "api", self.server_address[1]


parts = BIND.split(":")
srv = Server((parts[0], int(parts[1])), Handler)
if len(parts) > 2:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(parts[2], parts[3])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
threading.Timer(LIFETIME, srv.shutdown).start()
srv.serve_forever()
os._exit(0)
