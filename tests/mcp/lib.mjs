// The official MCP TypeScript SDK as a client of esbx: over stdio
// (`esbx mcp`, started as an agent starts it) or over Streamable HTTP
// (esbxd's /mcp with a bearer token).  Environment:
//   ESBX            the esbx binary          ESBX_ROOT  the store
//   MCP_TRANSPORT   stdio | http             MCP_URL    http://127.0.0.1:PORT/mcp
//   MCP_TOKEN       the bearer token (http)  MCP_ARGS   extra `esbx mcp` arguments (stdio)
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFileSync } from 'node:child_process';
import { Agent, fetch } from 'undici';
import assert from 'node:assert/strict';

export const transport = process.env.MCP_TRANSPORT || 'stdio';

// CONNECTIONS bounds the HTTP client's connections (undici's pool),
// as a browser or an agent's HTTP stack does; 0: as many as it likes.
export async function connect({ token = process.env.MCP_TOKEN, args = null, connections = 0 } = {}) {
  const client = new Client({ name: 'esbx-tests', version: '1.0.0' });
  let t;
  if (transport === 'stdio') {
    const extra = args ?? (process.env.MCP_ARGS ? process.env.MCP_ARGS.split(' ') : []);
    t = new StdioClientTransport({
      command: process.env.ESBX,
      args: ['mcp', ...extra],
      env: { PATH: process.env.PATH, ESBX_ROOT: process.env.ESBX_ROOT },
      stderr: 'inherit',
    });
  } else {
    const dispatcher = connections ? new Agent({ connections }) : undefined;
    t = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
      ...(dispatcher ? { fetch: (url, init) => fetch(url, { ...init, dispatcher }) } : {}),
    });
  }
  await client.connect(t);
  return client;
}

// `esbx ARGS` on the host: what the tools' results are checked against.
export function esbx(...args) {
  return execFileSync(process.env.ESBX, args, { encoding: 'utf8', env: process.env });
}

export function text(result) {
  return result.content.map((c) => c.text).join('');
}

export async function ok(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, `${name} failed: ${text(r)}`);
  return r;
}

export async function fails(client, name, args, pattern) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should have failed: ${text(r)}`);
  if (pattern) assert.match(text(r), pattern);
  return r;
}

export function check(step, fn) {
  return fn().then(
    () => console.log(`ok ${step}`),
    (e) => {
      console.log(`not ok ${step}: ${e.stack || e}`);
      throw e;
    },
  );
}
