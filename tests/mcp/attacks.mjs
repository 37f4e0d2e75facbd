// Attacks on the MCP server through the official SDK: paths out of the
// workspace (.., a symlink to /, an absolute path), a FIFO, malformed
// and unknown calls, 1,000 calls at once.  Each gets a clear error,
// changes nothing, and the server keeps serving.  MCP_SESSION names a
// session of project p (made by the caller).
import assert from 'node:assert/strict';
import { connect, esbx, fails, ok, text, transport } from './lib.mjs';

const session = process.env.MCP_SESSION;
const client = await connect();
const before = esbx('diff', session);

// Out of the workspace: refused before anything is opened.
await fails(client, 'file_read', { session, path: '../../etc/shadow' }, /`\.\.` is not allowed/);
await fails(client, 'file_read', { session, path: '/etc/shadow' }, /outside the workspace/);
await fails(client, 'file_write', { session, path: '../escape', contents: 'x' }, /`\.\.` is not allowed/);
await fails(client, 'file_list', { session, path: '/' }, /outside the workspace/);

// A symlink to / (and one to a host file) planted in the session: never
// followed, by any file tool.
await ok(client, 'run', { session, command: 'ln -s / rootlink && ln -s /etc/shadow shadowlink' });
await fails(client, 'file_read', { session, path: 'rootlink/etc/shadow' }, /symlink|Too many levels|not a directory/i);
await fails(client, 'file_read', { session, path: 'shadowlink' }, /symlink|Too many levels|not a regular file/i);
await fails(client, 'file_list', { session, path: 'rootlink' }, /symlink|Too many levels|not a directory/i);
await fails(client, 'file_write', { session, path: 'rootlink/tmp/planted', contents: 'x' }, /symlink/i);
await fails(client, 'file_edit', { session, path: 'shadowlink', search_text: 'root', replace_text: 'x' },
  /symlink|Too many levels|not a regular file/i);
let r = await ok(client, 'file_list', { session, depth: 3 });
assert.ok(!r.structuredContent.entries.some((e) => e.path.startsWith('rootlink/')));

// A FIFO: refused at once, never opened (a read would block).
await ok(client, 'run', { session, command: 'mkfifo fifo' });
const t0 = Date.now();
await fails(client, 'file_read', { session, path: 'fifo' }, /fifo, not a regular file/);
await fails(client, 'file_edit', { session, path: 'fifo', search_text: 'a', replace_text: 'b' }, /fifo/);
assert.ok(Date.now() - t0 < 5000, 'the FIFO blocked a file tool');

// Malformed and unknown calls.
await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /unknown tool `no_such_tool`/);
await fails(client, 'file_read', { session, path: 'README', bogus: 1 }, /unknown argument `bogus`/);
await fails(client, 'file_read', { session, path: 7 }, /argument `path` must be a string/);
await fails(client, 'run', { session, command: 'true', timeout_s: 0 }, /at least 1/);
await fails(client, 'file_read', { session: 'no-such-session', path: 'README' }, /does not exist/);
await fails(client, 'file_read', { session: '../x', path: 'README' }, /invalid session name/);

// 1,000 calls at once: each answered, and right.  Over HTTP through a
// pool of 100 connections (the server sees 100 requests at a time).
// A slow host (a sanitizer build) may take longer than the SDK's 60 s.
const slow = { timeout: 600000 };
async function thousand(c) {
  const calls = [];
  for (let i = 0; i < 1000; i++)
    calls.push(
      i % 10 === 0
        ? c.callTool({ name: 'run', arguments: { session, command: ['echo', `n${i}`] } }, undefined, slow)
        : c.callTool({ name: 'file_read', arguments: { session, path: 'README' } }, undefined, slow),
    );
  const settled = await Promise.allSettled(calls);
  let answered = 0, first = null;
  settled.forEach((s, i) => {
    if (s.status === 'rejected') {
      first ??= `call ${i}: ${s.reason}`;
      return;
    }
    // Never a wrong answer.
    assert.equal(s.value.isError, false, `call ${i}: ${text(s.value)}`);
    if (i % 10 === 0) assert.equal(s.value.structuredContent.stdout, `n${i}\n`);
    else assert.equal(s.value.structuredContent.content, 'hello\n');
    answered++;
  });
  return { answered, first };
}
const pooled = transport === 'http' ? await connect({ connections: 100 }) : client;
let got = await thousand(pooled);
assert.equal(got.answered, 1000, got.first);
console.log('1000 calls at once: 1000 answered');
if (transport === 'http') {
  // And on 1,000 connections of their own: the gateway's caps drop what
  // is past them (the client sees its connection closed), never answer
  // wrong, and serve on.
  got = await thousand(client);
  assert.ok(got.answered > 0, got.first);
  console.log(`1000 calls on 1000 connections: ${got.answered} answered, the rest dropped (${got.first})`);
  await pooled.close();
}

r = await ok(client, 'file_read', { session, path: 'README' });
assert.equal(r.structuredContent.content, 'hello\n');
await ok(client, 'run', { session, command: 'rm -f rootlink shadowlink fifo' });
assert.equal(esbx('diff', session), before);
await client.close();
console.log(`attacks over ${transport}: ok`);
