// An agent's day in a session, through the official SDK, with every result
// checked against esbx on the host: initialize, list the tools, make two
// sessions, write a file, run cat and a failing command, an edit with an
// ambiguous match, diff, publish, a conflicting publish, rebase, publish
// again.  Needs project p with README "hello\n" (make_tree).
import assert from 'node:assert/strict';
import { connect, esbx, fails, ok, text, transport } from './lib.mjs';

const all = [
  'diff', 'discard', 'events', 'file_delete', 'file_edit', 'file_list', 'file_read',
  'file_write', 'publish', 'rebase', 'resolve', 'run', 'session_create', 'session_fork',
  'session_inspect', 'session_list', 'session_snapshot',
];
const client = await connect();
const info = client.getServerVersion();
assert.equal(info.name, 'esbx');
const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name).sort(), all);
for (const t of tools) {
  assert.equal(t.inputSchema.type, 'object', t.name);
  assert.equal(t.outputSchema.type, 'object', t.name);
}

const a = `${transport}-a`, b = `${transport}-b`;
let r = await ok(client, 'session_create', { project: 'p', name: a, labels: { agent: 'sdk' } });
assert.equal(r.structuredContent.name, a);
await ok(client, 'session_create', { project: 'p', name: b });
assert.match(esbx('session', 'list'), new RegExp(`^${a}\\s`, 'm'));

// Write, then read back on the host and through run's cat.
const notes = 'one\ntwo\none\n';
r = await ok(client, 'file_write', { session: a, path: 'notes.txt', contents: notes });
assert.equal(r.structuredContent.size, notes.length);
assert.equal(esbx('exec', a, '--', 'cat', 'notes.txt'), notes);
r = await ok(client, 'run', { session: a, command: ['cat', 'notes.txt'] });
assert.equal(r.structuredContent.exit_code, 0);
assert.equal(r.structuredContent.stdout, notes);
r = await ok(client, 'run', { session: a, command: 'echo to-err >&2; exit 3' });
assert.equal(r.structuredContent.exit_code, 3);
assert.equal(r.structuredContent.stderr, 'to-err\n');
assert.match(text(r), /exit status 3/);
r = await ok(client, 'run', { session: a, command: 'echo "$GREETING"', env: { GREETING: 'hi' } });
assert.equal(r.structuredContent.stdout, 'hi\n');
r = await ok(client, 'file_read', { session: a, path: '/workspace/notes.txt', start_line: 2, end_line: 3 });
assert.equal(r.structuredContent.content, 'two\none\n');

// An ambiguous edit changes nothing; naming the match does it.
await fails(client, 'file_edit', { session: a, path: 'notes.txt', search_text: 'one', replace_text: 'uno' },
  /found 2 times/);
assert.equal(esbx('exec', a, '--', 'cat', 'notes.txt'), notes);
await fails(client, 'file_edit', { session: a, path: 'notes.txt', search_text: 'three', replace_text: 'x' },
  /not in the file/);
r = await ok(client, 'file_edit', { session: a, path: 'notes.txt', search_text: 'one', replace_text: 'uno', which_match: 2 });
assert.equal(r.structuredContent.matches, 2);
assert.equal(esbx('exec', a, '--', 'cat', 'notes.txt'), 'one\ntwo\nuno\n');

// a changes README and guide.txt's first line; b (below) README too, and
// guide.txt's end.
await ok(client, 'file_write', { session: a, path: 'README', contents: 'hello from a\n' });
await ok(client, 'file_write', { session: a, path: 'docs/guide.txt', contents: 'LINE1\nline2\n' });
r = await ok(client, 'diff', { session: a });
const paths = r.structuredContent.changes.map((c) => c.path).sort();
assert.deepEqual(paths, ['/README', '/docs/guide.txt', '/notes.txt']);
assert.match(esbx('diff', a), /notes\.txt/);
r = await ok(client, 'diff', { session: a, patch: true });
assert.match(r.structuredContent.patch, /\+hello from a/);

r = await ok(client, 'publish', { session: a, message: 'notes from a' });
assert.equal(r.structuredContent.published, true);
const layer = r.structuredContent.layer;
assert.match(esbx('project', 'log', 'p'), new RegExp(layer.slice(0, 12)));
assert.equal(esbx('show', 'p:notes.txt'), 'one\ntwo\nuno\n');

// b changed both too: refused, the paths as data, nothing published.
const head = esbx('project', 'log', 'p');
await ok(client, 'file_write', { session: b, path: 'README', contents: 'hello\nand b\n' });
await ok(client, 'file_write', { session: b, path: 'docs/guide.txt', contents: 'line1\nline2\nline3\n' });
r = await fails(client, 'publish', { session: b, message: 'from b' }, /rebase/);
assert.equal(r.structuredContent.published, false);
assert.deepEqual(r.structuredContent.conflicts.map((c) => c.path).sort(), ['/README', '/docs/guide.txt']);
assert.match(r.structuredContent.hint, /rebase/);
assert.equal(esbx('project', 'log', 'p'), head);

// Rebase merges guide.txt; README's lines overlap: left unmerged, named.
r = await fails(client, 'rebase', { session: b }, /unmerged/);
assert.equal(r.structuredContent.status, 'unmerged');
assert.deepEqual(r.structuredContent.merged, ['/docs/guide.txt']);
assert.deepEqual(r.structuredContent.unmerged.map((u) => u.path), ['/README']);
assert.equal(esbx('exec', b, '--', 'cat', 'docs/guide.txt'), 'LINE1\nline2\nline3\n');
await fails(client, 'publish', { session: b }, /resolve/);
await ok(client, 'file_write', { session: b, path: 'README', contents: 'hello from a\nand b\n' });
await ok(client, 'resolve', { session: b, paths: ['/README'] });
r = await ok(client, 'publish', { session: b, message: 'from b, rebased' });
assert.equal(r.structuredContent.published, true);
assert.equal(esbx('show', 'p:README'), 'hello from a\nand b\n');
assert.equal(esbx('show', 'p:docs/guide.txt'), 'LINE1\nline2\nline3\n');

// Every call was an event of its session.
r = await ok(client, 'events', { session: b });
const calls = r.structuredContent.events.filter((e) => e.type === 'mcp.call').map((e) => e.tool);
assert.ok(calls.includes('publish') && calls.includes('rebase'), calls.join(','));
assert.ok(r.structuredContent.events.every((e) => e.type !== 'mcp.call' || e.transport === transport));

await ok(client, 'discard', { session: a });
await ok(client, 'discard', { session: b });
assert.doesNotMatch(esbx('session', 'list'), new RegExp(`^${a}\\s`, 'm'));
await client.close();
console.log(`workflow over ${transport}: ok`);
