#!/usr/bin/env node
// Interop check: the official TypeScript MCP SDK client against one of our stdio servers.
//
// Usage:
//   node client.mjs [--timeout SECONDS] SERVER_COMMAND [SERVER_ARGS...]
//   e.g. node client.mjs ../../../target/release/examples/everything
//
// Spawns the server with the SDK's StdioClientTransport and drives it through
// `Client`, i.e. the code path a real TypeScript MCP host uses. Prints one line
// per check and then `interop-ts: N passed, M failed`; exits 0 only if every
// check passed. Per-step timeout: --timeout or env INTEROP_TIMEOUT (default 30 s).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const PREFIX = 'interop-ts';
const INVALID_PARAMS = -32602;
const HANDSHAKE_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
// Versions on which argument-validation failures are tool execution errors
// (isError: true, SEP-1303) rather than JSON-RPC -32602.
const ISERROR_VALIDATION_VERSIONS = ['2025-11-25', '2026-07-28'];
const CHECKS = ['connect', 'list_tools', 'echo', 'add', 'echo_invalid_args', 'echo_after_error', 'test_simple_text'];

let SDK_VERSION = 'unknown';
try {
  // (the package's exports map routes `sdk/package.json` to a dist stub, so read the real one)
  const pkg = new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url);
  SDK_VERSION = JSON.parse(readFileSync(pkg, 'utf8')).version ?? 'unknown';
} catch {
  // informational only
}

class CheckFailed extends Error {}

let passed = 0;
let failed = 0;
const ok = (label, detail = '') => {
  passed += 1;
  console.log(`[${PREFIX}] PASS ${label}${detail ? `: ${detail}` : ''}`);
};
const fail = (label, detail) => {
  failed += 1;
  console.log(`[${PREFIX}] FAIL ${label}: ${detail}`);
};
const note = (text) => console.log(`[${PREFIX}] NOTE ${text}`);

const short = (obj, limit = 300) => {
  const s = typeof obj === 'string' ? JSON.stringify(obj) : JSON.stringify(obj) ?? String(obj);
  return s.length <= limit ? s : `${s.slice(0, limit)}...(truncated)`;
};
const texts = (result) => (result?.content ?? []).filter((b) => b.type === 'text').map((b) => b.text ?? '');
const describe = (e) =>
  e instanceof McpError ? `JSON-RPC error ${e.code}: ${e.message}` : `${e?.name ?? 'Error'}: ${e?.message ?? e}`;

function expectSingleText(result, what) {
  if (result.isError) throw new CheckFailed(`${what}: unexpected isError=true result: ${short(result)}`);
  const content = result.content;
  if (!Array.isArray(content) || content.length !== 1) {
    throw new CheckFailed(`${what}: expected exactly one content block, got ${short(content)}`);
  }
  if (content[0].type !== 'text') throw new CheckFailed(`${what}: expected a text block, got ${short(content[0])}`);
  return content[0].text;
}

function parseArgs(argv) {
  let timeout = Number(process.env.INTEROP_TIMEOUT ?? '30');
  let i = 0;
  while (i < argv.length && argv[i].startsWith('--')) {
    if (argv[i] === '--timeout' && i + 1 < argv.length) {
      timeout = Number(argv[++i]);
    } else if (argv[i] === '--') {
      i += 1;
      break;
    } else {
      console.error(`${PREFIX}: unknown option ${argv[i]}`);
      process.exit(2);
    }
    i += 1;
  }
  const cmd = argv.slice(i);
  if (cmd.length === 0 || !(timeout > 0)) {
    console.error(`${PREFIX}: usage: node client.mjs [--timeout SECONDS] SERVER_COMMAND [ARGS...]`);
    process.exit(2);
  }
  return { timeoutMs: timeout * 1000, cmd };
}

let childPid;

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// Wait for the server process to go away (the SDK's close() escalates
// stdin EOF -> SIGTERM after 2 s -> SIGKILL after 4 s), then force it.
async function reap() {
  if (childPid === undefined) return;
  for (let i = 0; i < 60 && alive(childPid); i++) await new Promise((r) => setTimeout(r, 100));
  if (alive(childPid)) {
    note(`server pid ${childPid} still running after close; sending SIGKILL`);
    try {
      process.kill(childPid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

async function main() {
  const { timeoutMs, cmd } = parseArgs(process.argv.slice(2));
  console.log(`[${PREFIX}] @modelcontextprotocol/sdk ${SDK_VERSION}, node ${process.version}, server: ${cmd.join(' ')}`);

  // The SDK gives the child only an allow-list of env vars (HOME, PATH, ...);
  // pass ours through so RUST_LOG / RUST_BACKTRACE reach the server.
  const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
  const transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), env, stderr: 'inherit' });

  // Client does not expose the negotiated protocol version, so tap the raw
  // messages: Protocol.connect() chains to an onmessage set before connect().
  let initializeResult;
  transport.onmessage = (msg) => {
    if (msg && msg.id !== undefined && msg.result && typeof msg.result.protocolVersion === 'string') {
      initializeResult ??= msg.result;
    }
  };
  transport.onerror = (e) => console.error(`[${PREFIX}] transport error: ${e?.message ?? e}`);
  // Remember the child's pid: when connect() fails the SDK starts an
  // un-awaited close() and forgets the process, which could then outlive us.
  const start = transport.start.bind(transport);
  transport.start = async () => {
    await start();
    childPid = transport.pid ?? undefined;
  };

  const client = new Client({ name: 'mcp-interop-ts', version: '0.0.0' }, { capabilities: {} });
  const opts = { timeout: timeoutMs };
  const pending = [...CHECKS];
  const done = (name) => pending.splice(pending.indexOf(name), 1);

  // --- connect ---------------------------------------------------------------
  let negotiated;
  try {
    await client.connect(transport, opts);
    done('connect');
    negotiated = initializeResult?.protocolVersion;
    if (!HANDSHAKE_VERSIONS.includes(negotiated)) {
      throw new CheckFailed(`initialize returned unexpected protocolVersion ${short(negotiated)}`);
    }
    const caps = client.getServerCapabilities() ?? {};
    if (!caps.tools) throw new CheckFailed(`server capabilities lack 'tools': ${short(caps)}`);
    const info = client.getServerVersion() ?? {};
    ok('connect', `initialize ok, negotiated protocol version ${negotiated}, server ${info.name} ${info.version}`);
    console.log(`[${PREFIX}] negotiated protocolVersion: ${negotiated}`);
  } catch (e) {
    if (pending.includes('connect')) done('connect');
    fail('connect', e instanceof CheckFailed ? e.message : describe(e));
    for (const name of pending) fail(name, 'not run (connect failed)');
    await client.close().catch(() => {});
    return;
  }

  const step = async (name, body) => {
    done(name);
    try {
      ok(name, await body());
    } catch (e) {
      fail(name, e instanceof CheckFailed ? e.message : describe(e));
    }
  };

  await step('list_tools', async () => {
    const tools = new Map();
    let cursor;
    let pages = 0;
    do {
      if (++pages > 100) throw new CheckFailed('tools/list pagination did not terminate after 100 pages');
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, opts);
      for (const t of page.tools) tools.set(t.name, t);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    for (const name of ['echo', 'add']) {
      if (!tools.has(name)) throw new CheckFailed(`tool '${name}' missing; got ${short([...tools.keys()].sort())}`);
    }
    const schema = tools.get('echo').inputSchema;
    if (!schema || schema.type !== 'object') {
      throw new CheckFailed(`echo.inputSchema missing or not type=object: ${short(schema)}`);
    }
    return `${tools.size} tools: ${[...tools.keys()].sort().join(', ')}`;
  });

  await step('echo', async () => {
    const res = await client.callTool({ name: 'echo', arguments: { text: 'hello interop' } }, undefined, opts);
    const got = expectSingleText(res, 'echo');
    if (got !== 'hello interop') throw new CheckFailed(`echo returned ${short(got)}, expected "hello interop"`);
    return "text 'hello interop' round-tripped";
  });

  await step('add', async () => {
    const res = await client.callTool({ name: 'add', arguments: { a: 2, b: 3.5 } }, undefined, opts);
    if (res.isError) throw new CheckFailed(`add: unexpected isError=true result: ${short(res)}`);
    const t = texts(res);
    if (t[0] !== '5.5') {
      throw new CheckFailed(`add(2, 3.5) returned text ${short(t)}, expected "5.5" (full result ${short(res)})`);
    }
    return `text '5.5'${res.structuredContent !== undefined ? `, structuredContent=${short(res.structuredContent)}` : ''}`;
  });

  await step('echo_invalid_args', async () => {
    const expected = ISERROR_VALIDATION_VERSIONS.includes(negotiated) ? 'isError result' : 'JSON-RPC -32602';
    let form;
    let detail;
    try {
      const res = await client.callTool({ name: 'echo', arguments: { text: 5 } }, undefined, opts);
      if (!res.isError) throw new CheckFailed(`echo with text=5 succeeded instead of failing validation: ${short(res)}`);
      const msg = texts(res).join(' ').trim();
      if (!msg) throw new CheckFailed(`isError result carries no explanatory text: ${short(res)}`);
      if (!/text|string|type|invalid|valid/i.test(msg)) {
        throw new CheckFailed(`isError text does not mention the problem: ${short(msg)}`);
      }
      form = 'isError result';
      detail = `isError=true result (${short(msg)})`;
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      if (e.code !== INVALID_PARAMS) {
        throw new CheckFailed(`expected JSON-RPC error ${INVALID_PARAMS}, got ${e.code}: ${e.message}`);
      }
      form = 'JSON-RPC -32602';
      detail = `JSON-RPC error -32602 (${short(e.message)})`;
    }
    if (form !== expected) {
      note(`validation failure came back as ${form} but ${expected} is what protocol ${negotiated} calls for`);
    }
    console.log(`[${PREFIX}] validation-error form (protocol ${negotiated}): ${form}`);
    return `${detail} [protocol ${negotiated}]`;
  });

  await step('echo_after_error', async () => {
    const res = await client.callTool({ name: 'echo', arguments: { text: 'still alive' } }, undefined, opts);
    const got = expectSingleText(res, 'echo after error');
    if (got !== 'still alive') throw new CheckFailed(`echo returned ${short(got)}, expected "still alive"`);
    return 'session still usable after the validation failure';
  });

  await step('test_simple_text', async () => {
    const res = await client.callTool({ name: 'test_simple_text' }, undefined, opts);
    if (res.isError) throw new CheckFailed(`unexpected isError=true result: ${short(res)}`);
    const t = texts(res).filter((x) => x.trim());
    if (t.length === 0) throw new CheckFailed(`no non-empty text block in ${short(res)}`);
    return `text ${short(t[0], 80)}`;
  });

  try {
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
console.log(`${PREFIX}: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
