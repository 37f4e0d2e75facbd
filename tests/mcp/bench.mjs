// Tool-call latency through the official SDK (hack/bench/mcp): N calls of
// each of run `true`, file_read of a 1 KB file and file_write of 1 KB, one
// at a time after a warm-up; prints the median round trip of each in ms.
// MCP_SESSION names the session, BENCH_RUNS the number of calls.
import { connect, transport } from './lib.mjs';

const session = process.env.MCP_SESSION;
const n = Number(process.env.BENCH_RUNS || 200);
const client = await connect();
const kb = 'x'.repeat(1023) + '\n';

async function time(label, name, args) {
  const ms = [];
  for (let i = 0; i < Math.max(3, n / 10); i++) await client.callTool({ name, arguments: args });
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const r = await client.callTool({ name, arguments: args });
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r.isError) throw new Error(`${name}: ${r.content[0].text}`);
  }
  ms.sort((a, b) => a - b);
  console.log(`${transport} ${label}  ${ms[Math.floor(ms.length / 2)].toFixed(3)} ms`);
}

await client.callTool({ name: 'file_write', arguments: { session, path: 'bench-1k', contents: kb } });
await time('run true', 'run', { session, command: ['true'] });
await time('file_read 1 KB', 'file_read', { session, path: 'bench-1k' });
await time('file_write 1 KB', 'file_write', { session, path: 'bench-w', contents: kb });
await client.close();
