#!/usr/bin/env python3
"""A message of SIZE bytes on `esbx mcp`'s stdin, between an initialize and
a ping: the big one is refused whole with a JSON-RPC error, the ping is
answered, and the server's memory never held the message.  Prints the
answers one a line (the big one's error cut to 200 bytes), then
"maxrss KB" of the server."""
import json
import os
import subprocess
import sys

size = int(sys.argv[1])
args = sys.argv[2:]
p = subprocess.Popen([os.environ["ESBX"], "mcp", *args], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE)
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "big", "version": "1"}}}
p.stdin.write((json.dumps(init) + "\n").encode())
head = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"'
p.stdin.write(head)
chunk = b"a" * (1 << 20)
left = size - len(head) - 3
while left > 0:
    n = min(left, len(chunk))
    p.stdin.write(chunk[:n])
    left -= n
p.stdin.write(b'"}}\n')
p.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
p.stdin.flush()
for _ in range(3):
    print(p.stdout.readline().decode()[:200].rstrip())
with open(f"/proc/{p.pid}/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            print("maxrss", line.split()[1])
p.stdin.close()
p.wait(timeout=30)
