#!/usr/bin/env python3
"""git's smart HTTP for the git sync tests: `git http-backend` (CGI) behind
a small HTTP server on 127.0.0.1, with basic authentication when a user is
given.

    git_http.py ROOT PORTFILE [USER:PASSWORD]

Serves the repositories under ROOT, writes the port it listens on to
PORTFILE, logs each request's method, path and status (never the
Authorization header) to stderr, and stops by itself after 300 seconds or
2,000 requests.
"""
import base64
import http.server
import os
import subprocess
import sys
import threading

ROOT, PORTFILE = sys.argv[1], sys.argv[2]
CREDS = sys.argv[3] if len(sys.argv) > 3 else None
LIFETIME, MAX_REQUESTS = 300, 2000
served = 0


def read_body(handler):
    """The request body, de-chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                handler.rfile.readline()
                return out
            out += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path))

    def do_GET(self):
        self.backend()

    def do_POST(self):
        self.backend()

    def refuse(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def backend(self):
        global served
        served += 1
        if served > MAX_REQUESTS:
            os._exit(0)
        body = read_body(self)
        user = "anonymous"
        if CREDS is not None:
            want = "Basic " + base64.b64encode(CREDS.encode()).decode()
            if self.headers.get("Authorization") != want:
                return self.refuse()
            user = CREDS.split(":", 1)[0]
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=False).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, rest = out.partition(sep)
        status, headers = 200, []
        for line in head.decode().splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
timer = threading.Timer(LIFETIME, lambda: os._exit(0))
timer.daemon = True
timer.start()
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
