// Progress and cancellation of run through the official SDK: a long
// command reports progress; a cancelled call (AbortSignal: the SDK sends
// notifications/cancelled) ends the command and what it started, and so
// does its timeout_s; the server keeps serving.  MCP_SESSION names the
// session (made by the caller).
import assert from 'node:assert/strict';
import { connect, esbx, ok, text } from './lib.mjs';

const session = process.env.MCP_SESSION;
const client = await connect();

// Processes of the session running COMMAND, as esbx ps sees them.
function running(pattern) {
  return esbx('ps', session).split('\n').filter((l) => pattern.test(l));
}
async function gone(pattern) {
  for (let i = 0; i < 50; i++) {
    if (running(pattern).length === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`still running in ${session}:\n${running(pattern).join('\n')}`);
}

const progress = [];
let r = await client.callTool(
  { name: 'run', arguments: { session, command: 'for i in 1 2 3; do echo tick $i; sleep 1; done' } },
  undefined,
  { onprogress: (p) => progress.push(p) },
);
assert.equal(r.isError, false, text(r));
assert.equal(r.structuredContent.stdout, 'tick 1\ntick 2\ntick 3\n');
assert.ok(progress.length >= 2, `progress: ${JSON.stringify(progress)}`);
for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
assert.match(progress.at(-1).message, /tick/);
console.log(`progress: ${progress.length} notifications`);

// Cancelled once it runs: the shell and both sleeps go.
const ac = new AbortController();
let started;
const seen = new Promise((resolve) => (started = resolve));
const call = client.callTool(
  { name: 'run', arguments: { session, command: 'sleep 301 & sleep 302; wait' } },
  undefined,
  { signal: ac.signal, onprogress: () => started() },
);
await seen;
assert.equal(running(/\d sleep 30[12]$/).length, 2);
ac.abort('enough');
await assert.rejects(call);
await gone(/\d sleep 30[12]$/);
console.log('cancelled: no process left');

// timeout_s ends it the same way, and says so.
r = await client.callTool({ name: 'run', arguments: { session, command: 'sleep 303 & sleep 304; wait', timeout_s: 1 } });
assert.equal(r.isError, true);
assert.equal(r.structuredContent.timed_out, true);
assert.match(text(r), /timed out after 1 s/);
await gone(/\d sleep 30[34]$/);
console.log('timed out: no process left');

// The server goes on.
r = await ok(client, 'run', { session, command: ['true'] });
assert.equal(r.structuredContent.exit_code, 0);
await client.close();
console.log('cancel: ok');
