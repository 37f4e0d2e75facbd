#!/usr/bin/env python3
"""The calls of bench.mjs from a plain HTTP/1.1 client on one kept-alive
connection (hack/bench/mcp): the server's round trip without node's fetch,
which adds about a millisecond a request of its own.  Environment as for
bench.mjs: MCP_URL, MCP_TOKEN, MCP_SESSION, BENCH_RUNS."""
import http.client
import json
import os
import time

url, tok = os.environ["MCP_URL"], os.environ["MCP_TOKEN"]
session, n = os.environ["MCP_SESSION"], int(os.environ.get("BENCH_RUNS", "200"))
host, path = url.split("//", 1)[1].split("/", 1)
conn = http.client.HTTPConnection(host)
headers = {"Authorization": "Bearer " + tok, "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}
ids = iter(range(1, 1 << 30))


def post(method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params})
    conn.request("POST", "/" + path, body, headers)
    r = conn.getresponse()
    sid = r.getheader("Mcp-Session-Id")
    answer = json.loads(r.read())
    if "error" in answer or answer["result"].get("isError"):
        raise SystemExit(f"bench-raw: {method}: {answer}")
    return sid


headers["Mcp-Session-Id"] = post("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                "clientInfo": {"name": "bench", "version": "1"}})
kb = "x" * 1023 + "\n"
post("tools/call", {"name": "file_write", "arguments": {"session": session, "path": "bench-1k", "contents": kb}})
for label, name, args in [("run true", "run", {"command": ["true"]}),
                          ("file_read 1 KB", "file_read", {"path": "bench-1k"}),
                          ("file_write 1 KB", "file_write", {"path": "bench-w", "contents": kb})]:
    args["session"] = session
    ms = []
    for i in range(max(3, n // 10) + n):
        t0 = time.perf_counter()
        post("tools/call", {"name": name, "arguments": args})
        if i >= max(3, n // 10):
            ms.append((time.perf_counter() - t0) * 1000)
    ms.sort()
    print(f"http-raw {label}  {ms[len(ms) // 2]:.3f} ms")
