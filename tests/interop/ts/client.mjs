#!/usr/bin/env node
// Interop check: the official TypeScript MCP SDK client against one of our example servers.
//
// Usage:
//   node client.mjs [--http | --url URL] [--admin] [--timeout SECONDS] [--notify-timeout SECONDS]
//                   [SERVER_COMMAND [SERVER_ARGS...]]
//   e.g. node client.mjs ../../../target/release/examples/everything
//        node client.mjs --admin ../../../target/release/examples/everything --role admin
//        node client.mjs --http ../../../target/release/examples/everything
//        node client.mjs --url http://127.0.0.1:3000/mcp
//
// By default the server is spawned with the SDK's StdioClientTransport. With --http the
// client starts `SERVER_COMMAND [SERVER_ARGS...] --http 127.0.0.1:0` itself, reads the one
// line `listening on http://HOST:PORT/mcp` the server prints to stderr, connects with the
// SDK's StreamableHTTPClientTransport, ends the session with an HTTP DELETE and kills the
// server at the end (that process only: a wrapper script must `exec` the server); with
// --url it connects to a server that is already running. Either
// way the session is driven through `Client`, i.e. the code path a real TypeScript MCP
// host uses. Prints one line per check and then `interop-ts: N passed, M failed`; exits 0
// only if every check passed. Per-step timeout: --timeout or env INTEROP_TIMEOUT (default 30 s).
//
// --admin: the server's caller has the admin role (`--role admin`, stdio only), so the
// gated admin_echo tool and test://admin-secret resource must be visible and work
// (without it they must be hidden). Notification checks register handlers with
// client.setNotificationHandler(<SDK schema>, ...) and wait for the expected
// notification at most --notify-timeout / env INTEROP_NOTIFY_TIMEOUT (default 5 s); the
// progress check passes `onprogress` to callTool.
//
// Interaction checks: the client declares the sampling and elicitation capabilities and
// registers handlers for sampling/createMessage and elicitation/create; test_sampling and
// test_elicitation must make the server ask (the handler sees what the tool was given)
// and return the handler's answer in the tool result.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { servers, CheckFailed, reporter, sdkVersion } from './servers.mjs';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const PREFIX = 'interop-ts';
const INVALID_PARAMS = -32602;
const RESOURCE_NOT_FOUND = -32002;
const HANDSHAKE_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
// Versions on which argument-validation failures are tool execution errors
// (isError: true, SEP-1303) rather than JSON-RPC -32602.
const ISERROR_VALIDATION_VERSIONS = ['2025-11-25', '2026-07-28'];
const CHECKS = [
  'connect',
  'list_tools',
  'echo',
  'add',
  'echo_invalid_args',
  'echo_after_error',
  'test_simple_text',
  'list_resources',
  'read_static_text',
  'read_static_binary',
  'resource_template',
  'list_prompts',
  'get_prompt_with_arguments',
  'get_prompt_missing_argument',
  'complete_prompt_argument',
  'gated_items',
  'progress_notifications',
  'sampling',
  'elicitation',
  'resource_subscribe_updated',
  'tool_list_changed',
  'prompt_list_changed',
  'logging_notifications',
];

const STATIC_TEXT = 'This is the content of the static text resource.';
const ADMIN_SECRET = 'test://admin-secret';
const WATCHED = 'test://watched-resource';
const TEMPLATE = 'test://template/{id}/data';
const PROMPTS = [
  'test_simple_prompt',
  'test_prompt_with_arguments',
  'test_prompt_with_embedded_resource',
  'test_prompt_with_image',
];
const LOG_STEPS = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
// What the interaction checks send and what the client's handlers answer.
const SAMPLE_PROMPT = 'interop: name a colour';
const SAMPLE_ANSWER = 'interop-sampled: teal';
const ELICIT_MESSAGE = 'interop: who are you?';
const ELICIT_ANSWER = { username: 'interop-user', email: 'interop@example.com' };

const SDK_VERSION = sdkVersion();
const report = reporter(PREFIX);
const { ok, fail, note } = report;
const { reap, startHttpServer, stopHttpServer, spawned } = servers({ prefix: PREFIX, note, fail });

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

// Server notifications as delivered to the SDK's notification handlers, with bounded waits.
class Inbox {
  constructor() {
    this.notifications = []; // {method, params}
    this.wakers = new Set();
  }

  push(notification) {
    this.notifications.push({ method: notification.method, params: notification.params ?? {} });
    for (const wake of [...this.wakers]) wake();
  }

  count(method, pred = () => true) {
    return this.notifications.filter((n) => n.method === method && pred(n.params)).length;
  }

  since(mark, method) {
    return this.notifications.slice(mark).filter((n) => n.method === method);
  }

  methods() {
    return this.notifications.map((n) => n.method);
  }

  // Resolves to whether cond() holds, waiting for it at most `ms` milliseconds.
  async waitFor(cond, ms) {
    const deadline = Date.now() + ms;
    while (!cond()) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.wakers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.wakers.add(wake);
      });
    }
    return cond();
  }
}

async function paginate(fetch, key, what) {
  const items = [];
  let cursor;
  for (let pages = 0; pages < 100; pages++) {
    const page = await fetch(cursor === undefined ? undefined : { cursor });
    items.push(...(page[key] ?? []));
    cursor = page.nextCursor;
    if (cursor === undefined) return items;
  }
  throw new CheckFailed(`${what} pagination did not terminate after 100 pages`);
}

function parseArgs(argv) {
  let timeout = Number(process.env.INTEROP_TIMEOUT ?? '30');
  let notifyTimeout = Number(process.env.INTEROP_NOTIFY_TIMEOUT ?? '5');
  let admin = false;
  let http = false;
  let url;
  let i = 0;
  while (i < argv.length && argv[i].startsWith('--')) {
    if (argv[i] === '--timeout' && i + 1 < argv.length) {
      timeout = Number(argv[++i]);
    } else if (argv[i] === '--notify-timeout' && i + 1 < argv.length) {
      notifyTimeout = Number(argv[++i]);
    } else if (argv[i] === '--admin') {
      admin = true;
    } else if (argv[i] === '--http') {
      http = true;
    } else if (argv[i] === '--url' && i + 1 < argv.length) {
      url = argv[++i];
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
  const badTarget = url === undefined ? cmd.length === 0 : http || cmd.length > 0;
  if (badTarget || !(timeout > 0) || !(notifyTimeout > 0)) {
    console.error(
      `${PREFIX}: usage: node client.mjs [--http | --url URL] [--admin] [--timeout SECONDS] ` +
        '[--notify-timeout SECONDS] [SERVER_COMMAND [ARGS...]]  (--url takes no server command)',
    );
    process.exit(2);
  }
  return { timeoutMs: timeout * 1000, notifyMs: notifyTimeout * 1000, admin, http, url, cmd };
}

async function main() {
  const { timeoutMs, notifyMs, admin, http, url, cmd } = parseArgs(process.argv.slice(2));
  const over = http || url !== undefined ? 'streamable HTTP' : 'stdio';
  console.log(
    `[${PREFIX}] @modelcontextprotocol/sdk ${SDK_VERSION}, node ${process.version}, ${over}, ` +
      `server: ${url ?? cmd.join(' ')} (expecting ${admin ? 'admin' : 'anonymous'} caller)`,
  );
  const pending = [...CHECKS];
  const done = (name) => pending.splice(pending.indexOf(name), 1);

  let transport;
  if (over === 'stdio') {
    // The SDK gives the child only an allow-list of env vars (HOME, PATH, ...);
    // pass ours through so RUST_LOG / RUST_BACKTRACE reach the server.
    const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined));
    transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), env, stderr: 'inherit' });
    // Remember the child's pid: when connect() fails the SDK starts an
    // un-awaited close() and forgets the process, which could then outlive us.
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
        done('connect');
        fail('connect', e.message);
        for (const name of pending) fail(name, 'not run (connect failed)');
        return;
      }
    }
    transport = new StreamableHTTPClientTransport(new URL(target));
  }

  // Client does not expose the negotiated protocol version, so tap the raw
  // messages: Protocol.connect() chains to an onmessage set before connect().
  // The same tap keeps the order of progress notifications and responses as the transport
  // delivered them (see progress_notifications).
  let initializeResult;
  const tapped = []; // { progress: params } | { response: id }
  transport.onmessage = (msg) => {
    if (msg && msg.id !== undefined && msg.result && typeof msg.result.protocolVersion === 'string') {
      initializeResult ??= msg.result;
    }
    if (msg?.method === 'notifications/progress') tapped.push({ progress: msg.params });
    else if (msg && msg.method === undefined && msg.id !== undefined) tapped.push({ response: msg.id });
  };
  // (once we close, the SDK aborting its own streams is not worth a line)
  let closing = false;
  transport.onerror = (e) => {
    if (!closing) console.error(`[${PREFIX}] transport error: ${e?.message ?? e}`);
  };

  // Declaring sampling and elicitation (form mode) lets the server ask for them.
  const client = new Client(
    { name: 'mcp-interop-ts', version: '0.0.0' },
    { capabilities: { sampling: {}, elicitation: {} } },
  );
  const inbox = new Inbox();
  const logs = [];
  for (const schema of [
    ToolListChangedNotificationSchema,
    PromptListChangedNotificationSchema,
    ResourceUpdatedNotificationSchema,
  ]) {
    client.setNotificationHandler(schema, (n) => inbox.push(n));
  }
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(n.params);
    inbox.push(n);
  });
  // Server -> client requests: record what was asked, answer with fixed values.
  const asked = { sampling: [], elicitation: [] };
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    asked.sampling.push(req.params);
    return {
      role: 'assistant',
      content: { type: 'text', text: SAMPLE_ANSWER },
      model: 'interop-test-model',
      stopReason: 'endTurn',
    };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.elicitation.push(req.params);
    return { action: 'accept', content: { ...ELICIT_ANSWER } };
  });
  const opts = { timeout: timeoutMs };

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

  // --- resources ---------------------------------------------------------------
  const listResources = (p) => client.listResources(p, opts);
  const listTools = (p) => client.listTools(p, opts);
  const listPrompts = (p) => client.listPrompts(p, opts);

  await step('list_resources', async () => {
    const res = await paginate(listResources, 'resources', 'resources/list');
    const uris = res.map((r) => r.uri).sort();
    if (!uris.includes('test://static-text')) throw new CheckFailed(`test://static-text missing; got ${short(uris)}`);
    if (admin && !uris.includes(ADMIN_SECRET)) {
      throw new CheckFailed(`${ADMIN_SECRET} missing although the server runs with --role admin; got ${short(uris)}`);
    }
    if (!admin && uris.includes(ADMIN_SECRET)) {
      throw new CheckFailed(`gated ${ADMIN_SECRET} listed to an anonymous caller; got ${short(uris)}`);
    }
    const mime = res.find((r) => r.uri === 'test://static-text').mimeType;
    if (mime !== 'text/plain') throw new CheckFailed(`test://static-text mimeType ${short(mime)}, expected "text/plain"`);
    return `${uris.length} resources: ${uris.join(', ')}`;
  });

  await step('read_static_text', async () => {
    const { contents } = await client.readResource({ uri: 'test://static-text' }, opts);
    if (contents.length !== 1) throw new CheckFailed(`expected one contents entry, got ${short(contents)}`);
    const c = contents[0];
    if (c.text !== STATIC_TEXT) throw new CheckFailed(`text ${short(c.text)}, expected ${short(STATIC_TEXT)}`);
    if (c.uri !== 'test://static-text' || c.mimeType !== 'text/plain') {
      throw new CheckFailed(`uri/mimeType wrong: ${short(c)}`);
    }
    return `text ${short(STATIC_TEXT)}`;
  });

  await step('read_static_binary', async () => {
    const { contents } = await client.readResource({ uri: 'test://static-binary' }, opts);
    if (contents.length !== 1 || typeof contents[0].blob !== 'string') {
      throw new CheckFailed(`expected one blob entry, got ${short(contents)}`);
    }
    const raw = Buffer.from(contents[0].blob, 'base64');
    if (!raw.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
      throw new CheckFailed(`blob is not a PNG: ${raw.subarray(0, 16).toString('hex')}`);
    }
    if (contents[0].mimeType !== 'image/png') {
      throw new CheckFailed(`mimeType ${short(contents[0].mimeType)}, expected "image/png"`);
    }
    return `${raw.length}-byte PNG blob, mimeType image/png`;
  });

  await step('resource_template', async () => {
    const tpls = await paginate(
      (p) => client.listResourceTemplates(p, opts),
      'resourceTemplates',
      'resources/templates/list',
    );
    const got = tpls.map((t) => t.uriTemplate).sort();
    if (!got.includes(TEMPLATE)) throw new CheckFailed(`template ${TEMPLATE} missing; got ${short(got)}`);
    const { contents } = await client.readResource({ uri: 'test://template/123/data' }, opts);
    const body = contents.map((c) => c.text ?? '').join(' ');
    if (!body.includes('123')) throw new CheckFailed(`reading test://template/123/data gave no "123": ${short(contents)}`);
    return `templates ${short(got)}; read test://template/123/data -> ${short(body, 100)}`;
  });

  // --- prompts -------------------------------------------------------------------
  await step('list_prompts', async () => {
    const prompts = await paginate(listPrompts, 'prompts', 'prompts/list');
    const byName = new Map(prompts.map((p) => [p.name, p]));
    const missing = PROMPTS.filter((n) => !byName.has(n));
    if (missing.length) throw new CheckFailed(`prompts ${short(missing)} missing; got ${short([...byName.keys()].sort())}`);
    const args = Object.fromEntries(
      (byName.get('test_prompt_with_arguments').arguments ?? []).map((a) => [a.name, a.required ?? false]),
    );
    if (short(args) !== short({ arg1: true, arg2: true })) {
      throw new CheckFailed(`test_prompt_with_arguments arguments ${short(args)}, expected arg1/arg2 required`);
    }
    return `${byName.size} prompts: ${[...byName.keys()].sort().join(', ')}`;
  });

  await step('get_prompt_with_arguments', async () => {
    const res = await client.getPrompt(
      { name: 'test_prompt_with_arguments', arguments: { arg1: 'alpha-1', arg2: 'beta-2' } },
      opts,
    );
    const text = res.messages
      .filter((m) => m.content?.type === 'text')
      .map((m) => m.content.text)
      .join(' ');
    if (!text.includes('alpha-1') || !text.includes('beta-2')) {
      throw new CheckFailed(`prompt text lacks the argument values: ${short(res.messages)}`);
    }
    return `text ${short(text)}`;
  });

  await step('get_prompt_missing_argument', async () => {
    let res;
    try {
      res = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'only-one' } }, opts);
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      if (e.code !== INVALID_PARAMS) {
        throw new CheckFailed(`expected JSON-RPC error ${INVALID_PARAMS}, got ${e.code}: ${e.message}`);
      }
      return `JSON-RPC error -32602 (${short(e.message)})`;
    }
    throw new CheckFailed(`prompts/get without required arg2 succeeded: ${short(res)}`);
  });

  await step('complete_prompt_argument', async () => {
    const res = await client.complete(
      { ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'te' } },
      opts,
    );
    const values = res.completion?.values ?? [];
    if (!values.includes('testValue1')) throw new CheckFailed(`completion values ${short(values)} lack "testValue1"`);
    const bad = values.filter((v) => !v.startsWith('te'));
    if (bad.length) throw new CheckFailed(`completion values ${short(bad)} do not start with "te"`);
    return `values ${short(values)}`;
  });

  // --- gated items ----------------------------------------------------------------
  await step('gated_items', async () => {
    const tools = await paginate(listTools, 'tools', 'tools/list');
    const visible = tools.some((t) => t.name === 'admin_echo');
    if (admin) {
      if (!visible) throw new CheckFailed('admin_echo not listed although the server runs with --role admin');
      const got = expectSingleText(
        await client.callTool({ name: 'admin_echo', arguments: { text: 'hi' } }, undefined, opts),
        'admin_echo',
      );
      if (got !== 'admin: hi') throw new CheckFailed(`admin_echo returned ${short(got)}, expected "admin: hi"`);
      const { contents } = await client.readResource({ uri: ADMIN_SECRET }, opts);
      const body = contents.map((c) => c.text ?? '').join(' ');
      if (body !== 'The admin secret.') {
        throw new CheckFailed(`${ADMIN_SECRET} read ${short(contents)}, expected "The admin secret."`);
      }
      return `admin_echo -> ${short(got)}; ${ADMIN_SECRET} -> ${short(body)}`;
    }
    if (visible) throw new CheckFailed('gated admin_echo listed to an anonymous caller');
    let readErr;
    try {
      const res = await client.readResource({ uri: ADMIN_SECRET }, opts);
      throw new CheckFailed(`anonymous caller could read ${ADMIN_SECRET}: ${short(res)}`);
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      if (e.code !== RESOURCE_NOT_FOUND) note(`reading hidden ${ADMIN_SECRET} gave ${e.code}, not ${RESOURCE_NOT_FOUND}`);
      readErr = `read -> ${e.code} (${short(e.message)})`;
    }
    let callErr;
    try {
      const res = await client.callTool({ name: 'admin_echo', arguments: { text: 'hi' } }, undefined, opts);
      if (!res.isError) throw new CheckFailed(`anonymous caller could call admin_echo: ${short(res)}`);
      callErr = `call -> isError (${short(texts(res))})`;
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      callErr = `call -> ${e.code} (${short(e.message)})`;
    }
    return `hidden from anonymous caller: not listed; ${readErr}; ${callErr}`;
  });

  // --- progress ---------------------------------------------------------------------
  await step('progress_notifications', async () => {
    const got = [];
    const mark = tapped.length;
    const res = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      ...opts,
      onprogress: (p) => got.push(p),
    });
    if (res.isError) throw new CheckFailed(`test_tool_with_progress failed: ${short(res)}`);
    // What the server sent, in transport order: the SDK uses the request id as the token.
    const wire = tapped.slice(mark);
    const token = wire.find((e) => e.progress)?.progress.progressToken;
    const answeredAt = wire.findIndex((e) => e.response !== undefined && e.response === token);
    const sent = wire.filter((e, i) => e.progress?.progressToken === token && (answeredAt < 0 || i < answeredAt));
    const late = wire.filter((e, i) => e.progress?.progressToken === token && answeredAt >= 0 && i > answeredAt);
    if (late.length) throw new CheckFailed(`${late.length} notifications/progress arrived after the response: ${short(late)}`);
    const values = sent.map((e) => e.progress.progress);
    if (values.length < 3) {
      throw new CheckFailed(`server sent ${values.length} notifications/progress before the response, expected >= 3: ${short(wire)}`);
    }
    if (values.some((v, i) => i > 0 && !(v > values[i - 1]))) {
      throw new CheckFailed(`progress values ${short(values)} are not strictly increasing`);
    }
    const seen = got.map((p) => p.progress);
    if (short(seen) !== short(values)) {
      // SDK 1.32.2: _onresponse drops the progress handler at once, while notification
      // handlers run a microtask later, so a final progress read in the same chunk as the
      // response is lost (typescript-sdk#2580). That can only happen when both arrive in one
      // read, i.e. on stdio; over HTTP each SSE event is delivered on its own.
      const prefix = short(seen) === short(values.slice(0, seen.length));
      if (over !== 'stdio' || !prefix || seen.length < 2) {
        throw new CheckFailed(`onprogress saw progress ${short(seen)}, the server sent ${short(values)}`);
      }
      note(`progress_notifications: onprogress saw ${short(seen)} of ${short(values)}; the SDK dropped the ` +
        'rest, which arrived with the response (typescript-sdk#2580)');
    }
    return `${values.length} notifications before the result, token ${short(token)}: progress ${short(values)}, ` +
      `total ${short([...new Set(sent.map((e) => e.progress.total))])}; onprogress saw ${seen.length}`;
  });

  // --- interactions (server -> client requests) ----------------------------------------
  await step('sampling', async () => {
    const mark = asked.sampling.length;
    const res = await client.callTool({ name: 'test_sampling', arguments: { prompt: SAMPLE_PROMPT } }, undefined, opts);
    const got = asked.sampling.slice(mark);
    if (got.length !== 1) {
      throw new CheckFailed(`sampling/createMessage handler ran ${got.length} times, expected once: ${short(got)}`);
    }
    const prompt = (got[0].messages ?? []).filter((m) => m.role === 'user').map((m) => m.content?.text);
    if (short(prompt) !== short([SAMPLE_PROMPT])) {
      throw new CheckFailed(`sampling request messages ${short(got[0].messages)} do not carry the prompt ${short(SAMPLE_PROMPT)}`);
    }
    const text = expectSingleText(res, 'test_sampling');
    if (!text.includes(SAMPLE_ANSWER)) {
      throw new CheckFailed(`test_sampling returned ${short(text)}, which lacks the client's answer ${short(SAMPLE_ANSWER)}`);
    }
    return `handler got prompt ${short(SAMPLE_PROMPT)} (maxTokens ${got[0].maxTokens}); result ${short(text)}`;
  });

  await step('elicitation', async () => {
    const mark = asked.elicitation.length;
    const res = await client.callTool(
      { name: 'test_elicitation', arguments: { message: ELICIT_MESSAGE } },
      undefined,
      opts,
    );
    const got = asked.elicitation.slice(mark);
    if (got.length !== 1) {
      throw new CheckFailed(`elicitation/create handler ran ${got.length} times, expected once: ${short(got)}`);
    }
    if (got[0].message !== ELICIT_MESSAGE) {
      throw new CheckFailed(`elicitation message ${short(got[0].message)}, expected ${short(ELICIT_MESSAGE)}`);
    }
    const schema = got[0].requestedSchema ?? {};
    const fields = Object.keys(schema.properties ?? {}).sort();
    if (short(fields) !== short(['email', 'username']) || short([...(schema.required ?? [])].sort()) !== short(fields)) {
      throw new CheckFailed(`requestedSchema ${short(schema)} is not the required username/email form`);
    }
    const text = expectSingleText(res, 'test_elicitation');
    const missing = ['action=accept', ...Object.values(ELICIT_ANSWER)].filter((v) => !text.includes(v));
    if (missing.length) throw new CheckFailed(`test_elicitation returned ${short(text)}, which lacks ${short(missing)}`);
    return `handler got ${short(ELICIT_MESSAGE)} with fields ${short(fields)}; result ${short(text)}`;
  });

  // --- notifications -----------------------------------------------------------------
  const noNotification = (what) =>
    new CheckFailed(`no ${what} within ${notifyMs / 1000}s; notifications seen: ${short(inbox.methods())}`);

  await step('resource_subscribe_updated', async () => {
    const method = 'notifications/resources/updated';
    const watched = (p) => p.uri === WATCHED;
    await client.subscribeResource({ uri: WATCHED }, opts);
    const mark = inbox.count(method, watched);
    const res = await client.callTool({ name: 'test_trigger_resource_update' }, undefined, opts);
    if (res.isError) throw new CheckFailed(`test_trigger_resource_update failed: ${short(res)}`);
    if (!(await inbox.waitFor(() => inbox.count(method, watched) > mark, notifyMs))) {
      throw noNotification(`${method} for ${WATCHED}`);
    }
    await client.unsubscribeResource({ uri: WATCHED }, opts);
    return `subscribed, triggered, got ${method} uri=${WATCHED}`;
  });

  await step('tool_list_changed', async () => {
    const method = 'notifications/tools/list_changed';
    const names = async () => new Set((await paginate(listTools, 'tools', 'tools/list')).map((t) => t.name));
    if ((await names()).has('test_dynamic_tool')) {
      // Not a fresh server (--url, or an earlier session toggled it): toggle it away first,
      // and let that change's notification arrive before counting.
      const before = inbox.count(method);
      await client.callTool({ name: 'test_trigger_tool_change' }, undefined, opts);
      await inbox.waitFor(() => inbox.count(method) > before, notifyMs);
      if ((await names()).has('test_dynamic_tool')) {
        throw new CheckFailed('test_dynamic_tool still listed after test_trigger_tool_change removed it');
      }
    }
    const mark = inbox.count(method);
    const res = await client.callTool({ name: 'test_trigger_tool_change' }, undefined, opts);
    if (res.isError) throw new CheckFailed(`test_trigger_tool_change failed: ${short(res)}`);
    if (!(await inbox.waitFor(() => inbox.count(method) > mark, notifyMs))) throw noNotification(method);
    if (!(await names()).has('test_dynamic_tool')) {
      throw new CheckFailed('after list_changed, tools/list still lacks test_dynamic_tool');
    }
    const got = expectSingleText(
      await client.callTool({ name: 'test_dynamic_tool' }, undefined, opts),
      'test_dynamic_tool',
    );
    if (got !== 'dynamic tool called') throw new CheckFailed(`test_dynamic_tool returned ${short(got)}`);
    return `got ${method}; test_dynamic_tool listed and callable (${short(got)})`;
  });

  await step('prompt_list_changed', async () => {
    const method = 'notifications/prompts/list_changed';
    const names = async () => new Set((await paginate(listPrompts, 'prompts', 'prompts/list')).map((p) => p.name));
    if ((await names()).has('test_dynamic_prompt')) {
      // Not a fresh server (--url, or an earlier session toggled it): toggle it away first,
      // and let that change's notification arrive before counting.
      const before = inbox.count(method);
      await client.callTool({ name: 'test_trigger_prompt_change' }, undefined, opts);
      await inbox.waitFor(() => inbox.count(method) > before, notifyMs);
      if ((await names()).has('test_dynamic_prompt')) {
        throw new CheckFailed('test_dynamic_prompt still listed after test_trigger_prompt_change removed it');
      }
    }
    const mark = inbox.count(method);
    const res = await client.callTool({ name: 'test_trigger_prompt_change' }, undefined, opts);
    if (res.isError) throw new CheckFailed(`test_trigger_prompt_change failed: ${short(res)}`);
    if (!(await inbox.waitFor(() => inbox.count(method) > mark, notifyMs))) throw noNotification(method);
    if (!(await names()).has('test_dynamic_prompt')) {
      throw new CheckFailed('after list_changed, prompts/list still lacks test_dynamic_prompt');
    }
    return `got ${method}; test_dynamic_prompt listed`;
  });

  await step('logging_notifications', async () => {
    await client.setLoggingLevel('debug', opts);
    const mark = logs.length;
    const res = await client.callTool({ name: 'test_tool_with_logging' }, undefined, opts);
    if (res.isError) throw new CheckFailed(`test_tool_with_logging failed: ${short(res)}`);
    if (!(await inbox.waitFor(() => logs.length - mark >= LOG_STEPS.length, notifyMs))) {
      throw new CheckFailed(
        `got ${logs.length - mark} of ${LOG_STEPS.length} notifications/message within ${notifyMs / 1000}s: ` +
          short(logs.slice(mark)),
      );
    }
    const got = logs.slice(mark);
    if (got.length !== LOG_STEPS.length) {
      throw new CheckFailed(`expected ${LOG_STEPS.length} log messages, got ${got.length}: ${short(got)}`);
    }
    const levels = got.map((m) => m.level);
    const data = got.map((m) => m.data);
    if (levels.some((l) => l !== 'info')) throw new CheckFailed(`log levels ${short(levels)}, expected all "info"`);
    if (short(data) !== short(LOG_STEPS)) throw new CheckFailed(`log data ${short(data)}, expected ${short(LOG_STEPS)}`);
    return `${got.length} info messages via LoggingMessageNotificationSchema handler: ${short(data)}`;
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
