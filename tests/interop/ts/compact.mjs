#!/usr/bin/env node
// Interop check: the official TypeScript MCP SDK client against an example server in compact mode.
//
// Usage:
//   node compact.mjs [--http | --url URL] [--admin] [--timeout SECONDS] [SERVER_COMMAND [SERVER_ARGS...]]
//   e.g. node compact.mjs ../../../target/debug/examples/everything --mode compact
//        node compact.mjs --http ../../../target/debug/examples/everything --mode compact
//
// The server must publish compactly (`--mode compact`): tools/list is exactly search_tools,
// get_tool_details and call_tool. It is started and connected as client.mjs does it (stdio:
// the SDK's StdioClientTransport spawns it; --http: `SERVER_COMMAND [SERVER_ARGS...] --http
// 127.0.0.1:0`, the URL read from its `listening on http://HOST:PORT/mcp` stderr line, the
// SDK's StreamableHTTPClientTransport, DELETE at the end, then the server is killed; --url: a
// running server), and every request goes through `Client`, so the SDK parses (and, for tools
// with an outputSchema, validates) each result as a real host would.
//
// Checks: the three tools and their input schemas (no outputSchema); search_tools ranks `echo`
// first for "echo" (the gated admin_echo is found only with --admin), returns 5 results by
// default and honours `limit`, and refuses an out-of-range limit with JSON-RPC -32602;
// get_tool_details("echo") returns echo's definition; call_tool runs `echo` and `add` (plain
// text results, passed through as the tools return them), and reports an unknown inner name as
// the `unavailable` failure and bad inner arguments as the `invalid_arguments` failure.
// Discovery results and failures must be {"value": ...} / {"failure": {...}} envelopes in
// structuredContent with the same JSON as the one text block.
//
// Prints one line per check and then `interop-ts: N passed, M failed` (the line run.sh looks
// for); exits 0 only if every check passed. Per-step timeout: --timeout or env INTEROP_TIMEOUT
// (default 30 s).

import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { servers, CheckFailed, reporter, sdkVersion } from './servers.mjs';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const PREFIX = 'interop-ts';
const INVALID_PARAMS = -32602;
const HANDSHAKE_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
// Each published tool's input properties (name -> type) and required ones, as compact.rs declares them.
const INPUTS = {
  search_tools: [{ query: 'string', limit: 'integer' }, ['query']],
  get_tool_details: [{ name: 'string' }, ['name']],
  call_tool: [{ name: 'string', arguments: 'object' }, ['name']],
};
const DEFAULT_RESULTS = 5;
const MAX_RESULTS = 20;
const ECHO_DESCRIPTION = 'Echoes back the given text';
const UNKNOWN_TOOL = 'no_such_tool';
const CHECKS = [
  'connect',
  'list_tools',
  'search_ranks_echo_first',
  'search_limit',
  'search_limit_out_of_range',
  'get_tool_details_echo',
  'call_tool_echo',
  'call_tool_add',
  'call_tool_unknown_name',
  'call_tool_invalid_arguments',
  'call_tool_after_failure',
];

const SDK_VERSION = sdkVersion();
const report = reporter(PREFIX);
const { ok, fail, note } = report;
const { reap, startHttpServer, stopHttpServer, spawned } = servers({ prefix: PREFIX, note, fail });
const short = (obj, limit = 300) => {
  const s = JSON.stringify(obj) ?? String(obj);
  return s.length <= limit ? s : `${s.slice(0, limit)}...(truncated)`;
};
const describe = (e) =>
  e instanceof McpError ? `JSON-RPC error ${e.code}: ${e.message}` : `${e?.name ?? 'Error'}: ${e?.message ?? e}`;

// structuredContent[key] of a result whose one text block is the same JSON: key is 'value'
// for a success (isError absent or false) and 'failure' for an isError result.
function envelope(res, key, what) {
  const wantError = key === 'failure';
  if (Boolean(res.isError) !== wantError) {
    throw new CheckFailed(`${what}: isError=${res.isError}, expected ${wantError}: ${short(res)}`);
  }
  const sc = res.structuredContent;
  if (sc === null || typeof sc !== 'object' || !isDeepStrictEqual(Object.keys(sc), [key])) {
    throw new CheckFailed(`${what}: structuredContent is not a {"${key}": ...} envelope: ${short(sc)}`);
  }
  const content = res.content ?? [];
  if (content.length !== 1 || content[0].type !== 'text') {
    throw new CheckFailed(`${what}: expected one text block mirroring the envelope, got ${short(content)}`);
  }
  let mirrored;
  try {
    mirrored = JSON.parse(content[0].text);
  } catch (e) {
    throw new CheckFailed(`${what}: the text block is not JSON (${e.message}): ${short(content[0])}`);
  }
  if (!isDeepStrictEqual(mirrored, sc)) {
    throw new CheckFailed(`${what}: text block ${short(mirrored)} differs from structuredContent ${short(sc)}`);
  }
  return sc[key];
}

function failure(res, code, what) {
  const f = envelope(res, 'failure', what);
  if (f === null || typeof f !== 'object' || f.code !== code) {
    throw new CheckFailed(`${what}: failure ${short(f)}, expected code "${code}"`);
  }
  if (typeof f.message !== 'string' || !f.message) throw new CheckFailed(`${what}: failure without a message: ${short(f)}`);
  if (f.retryable !== false) throw new CheckFailed(`${what}: failure retryable=${f.retryable}, expected false`);
  return f;
}

// The one text block of a successful result that carries no structuredContent.
function plainText(res, what) {
  if (res.isError) throw new CheckFailed(`${what}: unexpected isError=true result: ${short(res)}`);
  if (res.structuredContent !== undefined) {
    throw new CheckFailed(`${what}: a text-only tool's result gained structuredContent: ${short(res)}`);
  }
  const content = res.content ?? [];
  if (content.length !== 1 || content[0].type !== 'text') {
    throw new CheckFailed(`${what}: expected exactly one text block, got ${short(content)}`);
  }
  return content[0].text;
}

function parseArgs(argv) {
  let timeout = Number(process.env.INTEROP_TIMEOUT ?? '30');
  let admin = false;
  let http = false;
  let url;
  let i = 0;
  while (i < argv.length && argv[i].startsWith('--')) {
    if (argv[i] === '--timeout' && i + 1 < argv.length) timeout = Number(argv[++i]);
    else if (argv[i] === '--admin') admin = true;
    else if (argv[i] === '--http') http = true;
    else if (argv[i] === '--url' && i + 1 < argv.length) url = argv[++i];
    else if (argv[i] === '--') {
      i += 1;
      break;
    } else {
      console.error(`${PREFIX}: unknown option ${argv[i]}`);
      process.exit(2);
    }
    i += 1;
  }
  const cmd = argv.slice(i);
  const badTarget = url === undefined ? cmd.length === 0 : http || cmd.length > 0;
  if (badTarget || !(timeout > 0)) {
    console.error(
      `${PREFIX}: usage: node compact.mjs [--http | --url URL] [--admin] [--timeout SECONDS] ` +
        '[SERVER_COMMAND [ARGS...]]  (--url takes no server command)',
    );
    process.exit(2);
  }
  return { timeoutMs: timeout * 1000, admin, http, url, cmd };
}

async function main() {
  const { timeoutMs, admin, http, url, cmd } = parseArgs(process.argv.slice(2));
  const over = http || url !== undefined ? 'streamable HTTP' : 'stdio';
  console.log(
    `[${PREFIX}] @modelcontextprotocol/sdk ${SDK_VERSION}, node ${process.version}, ${over}, compact mode, ` +
      `server: ${url ?? cmd.join(' ')}`,
  );
  const notRun = (from, why) => {
    for (const name of CHECKS.slice(from)) fail(name, why);
  };

  let transport;
  if (over === 'stdio') {
    // As in client.mjs: pass our environment through (the SDK's default is an allow-list).
    const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
    transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), env, stderr: 'inherit' });
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      spawned(transport.pid ?? undefined);
    };
  } else {
    let target = url;
    if (http) {
      try {
        target = await startHttpServer(cmd, timeoutMs);
      } catch (e) {
        fail('connect', e.message);
        notRun(1, 'not run (connect failed)');
        return;
      }
    }
    transport = new StreamableHTTPClientTransport(new URL(target));
  }
  // Client does not expose the negotiated protocol version: tap the initialize response.
  let initializeResult;
  transport.onmessage = (msg) => {
    if (msg && msg.id !== undefined && msg.result && typeof msg.result.protocolVersion === 'string') {
      initializeResult ??= msg.result;
    }
  };
  let closing = false;
  transport.onerror = (e) => {
    if (!closing) console.error(`[${PREFIX}] transport error: ${e?.message ?? e}`);
  };

  const client = new Client({ name: 'mcp-interop-ts-compact', version: '0.0.0' }, { capabilities: {} });
  const opts = { timeout: timeoutMs };
  try {
    await client.connect(transport, opts);
    const negotiated = initializeResult?.protocolVersion;
    if (!HANDSHAKE_VERSIONS.includes(negotiated)) {
      throw new CheckFailed(`initialize returned unexpected protocolVersion ${short(negotiated)}`);
    }
    ok('connect', `initialize ok, negotiated protocol version ${negotiated}`);
  } catch (e) {
    fail('connect', e instanceof CheckFailed ? e.message : describe(e));
    notRun(1, 'not run (connect failed)');
    await client.close().catch(() => {});
    return;
  }

  const step = async (name, body) => {
    try {
      ok(name, await body());
    } catch (e) {
      fail(name, e instanceof CheckFailed ? e.message : describe(e));
    }
  };
  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, opts);
  const search = async (args, what) => {
    const found = envelope(await call('search_tools', args), 'value', what);
    const tools = found?.tools;
    if (!Array.isArray(tools) || !tools.every((t) => t && typeof t.name === 'string')) {
      throw new CheckFailed(`${what}: value is not {"tools": [{"name": ...}, ...]}: ${short(found)}`);
    }
    return tools.map((t) => t.name);
  };

  await step('list_tools', async () => {
    const tools = new Map();
    let cursor;
    let pages = 0;
    do {
      if (++pages > 100) throw new CheckFailed('tools/list pagination did not terminate after 100 pages');
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, opts);
      for (const t of page.tools) {
        if (tools.has(t.name)) throw new CheckFailed(`tool ${short(t.name)} listed twice`);
        tools.set(t.name, t);
      }
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    const names = [...tools.keys()].sort();
    if (!isDeepStrictEqual(names, Object.keys(INPUTS).sort())) {
      throw new CheckFailed(`tools/list is ${short(names)}, expected exactly ${short(Object.keys(INPUTS).sort())}`);
    }
    for (const [name, [props, required]] of Object.entries(INPUTS)) {
      const t = tools.get(name);
      if (t.outputSchema !== undefined) throw new CheckFailed(`${name} has an outputSchema: ${short(t.outputSchema)}`);
      const schema = t.inputSchema ?? {};
      const got = Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, v?.type]));
      if (schema.type !== 'object' || !isDeepStrictEqual(got, props) || !isDeepStrictEqual(schema.required, required)) {
        throw new CheckFailed(`${name}.inputSchema ${short(schema)}: expected properties ${short(props)}, required ${short(required)}`);
      }
      if (schema.additionalProperties !== false) {
        throw new CheckFailed(`${name}.inputSchema does not forbid additional properties: ${short(schema)}`);
      }
    }
    const limit = tools.get('search_tools').inputSchema.properties.limit;
    if (!isDeepStrictEqual([limit.minimum, limit.maximum, limit.default], [1, MAX_RESULTS, DEFAULT_RESULTS])) {
      throw new CheckFailed(`search_tools limit schema ${short(limit)}: expected 1..${MAX_RESULTS}, default ${DEFAULT_RESULTS}`);
    }
    return `exactly ${names.join(', ')}, input schemas as declared, no outputSchema`;
  });

  await step('search_ranks_echo_first', async () => {
    const names = await search({ query: 'echo' }, 'search_tools(echo)');
    if (names[0] !== 'echo') throw new CheckFailed(`search_tools(echo) ranked ${short(names)}, expected "echo" first`);
    if (admin !== names.includes('admin_echo')) {
      throw new CheckFailed(`search_tools(echo) gave ${short(names)}: the gated admin_echo must be found ` +
        `${admin ? '' : 'only '}by an admin caller`);
    }
    return short(names);
  });

  await step('search_limit', async () => {
    const dflt = await search({ query: 'test' }, 'search_tools(test)');
    if (dflt.length !== DEFAULT_RESULTS) {
      throw new CheckFailed(`search_tools(test) without limit gave ${dflt.length} results, expected ${DEFAULT_RESULTS}: ${short(dflt)}`);
    }
    const two = await search({ query: 'test', limit: 2 }, 'search_tools(test, limit 2)');
    if (!isDeepStrictEqual(two, dflt.slice(0, 2))) {
      throw new CheckFailed(`limit 2 gave ${short(two)}, expected the first two of ${short(dflt)}`);
    }
    const most = await search({ query: 'test', limit: MAX_RESULTS }, `search_tools(test, limit ${MAX_RESULTS})`);
    if (!(most.length > DEFAULT_RESULTS && most.length <= MAX_RESULTS) ||
      !isDeepStrictEqual(most.slice(0, DEFAULT_RESULTS), dflt)) {
      throw new CheckFailed(`limit ${MAX_RESULTS} gave ${short(most)}, expected more than ${DEFAULT_RESULTS} starting with ${short(dflt)}`);
    }
    return `default ${dflt.length}, limit 2 -> ${short(two)}, limit ${MAX_RESULTS} -> ${most.length} results`;
  });

  await step('search_limit_out_of_range', async () => {
    let res;
    try {
      res = await call('search_tools', { query: 'test', limit: MAX_RESULTS + 1 });
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      if (e.code !== INVALID_PARAMS) {
        throw new CheckFailed(`expected JSON-RPC error ${INVALID_PARAMS}, got ${e.code}: ${e.message}`);
      }
      return `JSON-RPC error -32602 (${short(e.message)})`;
    }
    throw new CheckFailed(`limit ${MAX_RESULTS + 1} was accepted: ${short(res)}`);
  });

  await step('get_tool_details_echo', async () => {
    const d = envelope(await call('get_tool_details', { name: 'echo' }), 'value', 'get_tool_details(echo)');
    if (d?.name !== 'echo' || d.description !== ECHO_DESCRIPTION) throw new CheckFailed(`not echo's definition: ${short(d)}`);
    const schema = d.inputSchema ?? {};
    if (schema.type !== 'object' || schema.properties?.text?.type !== 'string' ||
      !isDeepStrictEqual(schema.required, ['text'])) {
      throw new CheckFailed(`echo's inputSchema ${short(schema)} lacks the required string "text"`);
    }
    return `name, description and inputSchema of echo (${short(d, 120)})`;
  });

  await step('call_tool_echo', async () => {
    const got = plainText(await call('call_tool', { name: 'echo', arguments: { text: 'hello compact' } }), 'echo');
    if (got !== 'hello compact') throw new CheckFailed(`echo returned ${short(got)}, expected "hello compact"`);
    return "text 'hello compact' round-tripped";
  });

  await step('call_tool_add', async () => {
    const got = plainText(await call('call_tool', { name: 'add', arguments: { a: 2, b: 3.5 } }), 'add');
    if (got !== '5.5') throw new CheckFailed(`add(2, 3.5) returned ${short(got)}, expected "5.5"`);
    return "text '5.5', no structuredContent (passed through as add returns it)";
  });

  await step('call_tool_unknown_name', async () => {
    const f = failure(await call('call_tool', { name: UNKNOWN_TOOL, arguments: {} }), 'unavailable', UNKNOWN_TOOL);
    return `isError, failure ${short(f)}`;
  });

  await step('call_tool_invalid_arguments', async () => {
    const res = await call('call_tool', { name: 'echo', arguments: { text: 5 } });
    const f = failure(res, 'invalid_arguments', 'echo with text=5');
    if (!f.message.includes('echo') || !f.message.includes('text')) {
      throw new CheckFailed(`the message does not name the tool and the field: ${short(f.message)}`);
    }
    return `isError, failure ${short(f)}`;
  });

  await step('call_tool_after_failure', async () => {
    const got = plainText(await call('call_tool', { name: 'echo', arguments: { text: 'still alive' } }), 'echo');
    if (got !== 'still alive') throw new CheckFailed(`echo returned ${short(got)}, expected "still alive"`);
    return 'session still usable after the failures';
  });

  try {
    // Streamable HTTP: end the session with DELETE, as a well-behaved host does.
    if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession();
    closing = true;
    await client.close();
  } catch (e) {
    fail('close', describe(e));
  }
}

try {
  await main();
} catch (e) {
  fail('unexpected', e?.stack ?? String(e));
}
await reap();
await stopHttpServer();
report.finish();
