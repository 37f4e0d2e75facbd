// Loaded into the conformance suite's node (NODE_OPTIONS=--import): its
// server mode has no option for a header, and esbxd's gateway takes no
// request without a token.  Every request it makes (the SDK's fetch and
// its own undici requests, both through undici's global dispatcher)
// carries `Authorization: Bearer $MCP_TOKEN`; nothing else changes.
import { Agent, setGlobalDispatcher } from 'undici';

const auth = `Bearer ${process.env.MCP_TOKEN}`;

function withAuth(headers) {
  if (headers == null) return { authorization: auth };
  if (Array.isArray(headers)) {
    const out = [];
    for (let i = 0; i < headers.length; i += 2)
      if (String(headers[i]).toLowerCase() !== 'authorization') out.push(headers[i], headers[i + 1]);
    return [...out, 'authorization', auth];
  }
  const out = {};
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== 'authorization') out[k] = v;
  out.authorization = auth;
  return out;
}

setGlobalDispatcher(
  new Agent().compose((dispatch) => (opts, handler) => dispatch({ ...opts, headers: withAuth(opts.headers) }, handler)),
);
