// One call through the official SDK, for the bats suite:
//   node call.mjs tools              the names tools/list answers, one a line
//   node call.mjs TOOL 'JSON-ARGS'   the CallToolResult as JSON
// (connection as lib.mjs says).  A protocol error exits 2 with its message.
import { connect } from './lib.mjs';

const [what, args] = process.argv.slice(2);
const client = await connect();
try {
  if (what === 'tools') {
    const { tools } = await client.listTools();
    console.log(tools.map((t) => t.name).join('\n'));
  } else {
    console.log(JSON.stringify(await client.callTool({ name: what, arguments: JSON.parse(args || '{}') })));
  }
} catch (e) {
  console.error(String(e.message || e));
  process.exitCode = 2;
} finally {
  await client.close();
}
