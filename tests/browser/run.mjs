// The browser proof of MCP Apps (see run.sh): headless Debian Chromium, driven by playwright-core,
// loads a harness page that hosts the official ext-apps AppBridge with the official MCP client,
// against (1) the `everything` example's app, whose page runs our widget client, and (2) the
// apps-probe server's app, whose page runs the official ext-apps `App` class.
//
// Usage: node run.mjs EVERYTHING_BINARY PROBE_BINARY OUT_DIR
// Prints one ok/FAIL line per check; exits 1 if any failed (or the run passed its deadline).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { chromium } from "playwright-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const [EVERYTHING, PROBE, OUT] = process.argv.slice(2);
if (!EVERYTHING || !PROBE || !OUT) {
  console.error("usage: node run.mjs EVERYTHING_BINARY PROBE_BINARY OUT_DIR");
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const DEADLINE_MS = Number(process.env.BROWSER_DEADLINE_MS || 90000);
const MIME = "text/html;profile=mcp-app";

let failures = 0;
const cleanups = [];
async function cleanup() {
  for (const f of cleanups.reverse()) {
    try {
      await f();
    } catch {}
  }
}

async function check(name, fn) {
  const start = Date.now();
  try {
    await fn();
    console.log(`ok    ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL  ${name}: ${e?.stack || e}`);
  }
}

function assert(cond, what) {
  if (!cond) throw new Error(what);
}
function eq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  if (a !== b) throw new Error(`${what}: expected ${b}, got ${a}`);
}

// ---- servers ------------------------------------------------------------------------------------

function startServer(name, bin, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [...args, "--http", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
    cleanups.push(() => child.kill("SIGTERM"));
    let err = "";
    const timer = setTimeout(() => reject(new Error(`${name}: no "listening on" line in 10 s:\n${err}`)), 10000);
    child.stderr.on("data", (d) => {
      err += d;
      const m = /listening on (http:\/\/\S+)\n/.exec(err); // whole lines only
      if (m) {
        clearTimeout(timer);
        resolve(new URL(m[1]));
      }
    });
    child.on("exit", (code) => reject(new Error(`${name} exited (${code}):\n${err}`)));
  });
}

// Our HTTP endpoint refuses a browser Origin that is not same-origin with its Host (a 403), and
// it sends no CORS headers. So the harness page and /mcp share one origin: this server serves
// the page and passes /NAME/mcp through to each MCP server unchanged, Host header included, so
// the server sees a same-origin request on a loopback Host.
function startFront(routes, files) {
  const front = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    const upstream = routes[url.pathname];
    if (upstream) {
      const fwd = http.request(
        { host: upstream.hostname, port: upstream.port, path: upstream.pathname, method: req.method, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode, up.headers);
          up.pipe(res);
        },
      );
      fwd.on("error", (e) => {
        res.writeHead(502).end(String(e));
      });
      req.pipe(fwd);
      return;
    }
    if (url.pathname === "/favicon.ico") return res.writeHead(204).end();
    const file = files[url.pathname];
    if (!file) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": file.type, "cache-control": "no-store" }).end(file.body);
  });
  cleanups.push(() => new Promise((r) => front.close(r)));
  return new Promise((resolve) => front.listen(0, "127.0.0.1", () => resolve(front.address().port)));
}

// Our Rust helper's rule (mcp_server::widget): `<` written as \x3C where it would start
// `</script` or `<!--`, so a bundle cannot end its inline <script> early.
const escapeScript = (js) => js.replace(/<(?=\/script|!--)/gi, "\\x3C");

async function bundle(entry, format) {
  const out = await esbuild.build({
    entryPoints: [path.join(HERE, entry)],
    bundle: true,
    format,
    platform: "browser",
    target: "es2022",
    minify: true,
    write: false,
    logLevel: "warning",
  });
  return out.outputFiles[0].text;
}

// Our widget client as the crate ships it (mcp_server::widget::widget_client_js includes this
// file), for pages of the test's own; the everything app carries the same bytes.
const CLIENT_JS = readFileSync(path.join(HERE, "../../mcp-server/assets/mcp-app.js"), "utf8");
const pageWith = (script) =>
  `<!DOCTYPE html><html><head><meta charset="utf-8"><script>${CLIENT_JS}</script></head>` +
  `<body><script>${escapeScript(script)}</script></body></html>`;

// ---- the run --------------------------------------------------------------------------------------

async function main() {
  mkdirSync(OUT, { recursive: true });
  const [hostJs, appJs] = await Promise.all([bundle("host.js", "esm"), bundle("official-app.js", "esm")]);
  const officialHtml = readFileSync(path.join(HERE, "official-app.html"), "utf8").replace(
    "<!-- official-app bundle -->",
    () => `<script type="module">${escapeScript(appJs)}</script>`,
  );
  const officialPath = path.join(OUT, "official-app.html");
  writeFileSync(officialPath, officialHtml);

  const [everythingUrl, probeUrl] = await Promise.all([
    startServer("everything", EVERYTHING, []),
    startServer("apps-probe", PROBE, ["--html", officialPath]),
  ]);
  const port = await startFront(
    { "/everything/mcp": everythingUrl, "/probe/mcp": probeUrl },
    {
      "/": { type: "text/html", body: readFileSync(path.join(HERE, "harness.html")) },
      "/host.js": { type: "text/javascript", body: hostJs },
    },
  );
  console.log(`servers: everything ${everythingUrl}, apps-probe ${probeUrl}; harness http://127.0.0.1:${port}/`);

  const profile = mkdtempSync(path.join(tmpdir(), "mcp-browser-"));
  cleanups.push(() => rmSync(profile, { recursive: true, force: true }));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 600, height: 900 },
  });
  cleanups.push(() => context.close());
  console.log(`browser: ${CHROMIUM} ${context.browser()?.version() ?? ""}`.trim());
  const page = context.pages()[0] || (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") pageErrors.push(m.text());
  });
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.waitForFunction(() => document.documentElement.dataset.ready === "1");

  // ---- our widget client in the everything example's app ----
  let w;
  let frame;
  const inFrame = (fn, arg) => frame.evaluate(fn, arg);
  await check("everything: a tool links a ui:// app with our client, read as text/html;profile=mcp-app", async () => {
    w = await page.evaluate(() => window.harness.mount("everything", { mcpPath: "/everything/mcp", needle: "window.mcpApp =" }));
    assert(w.uri.startsWith("ui://"), `resource URI ${w.uri}`);
    eq(w.mimeType, MIME, "mimeType of the read contents");
    frame = await (await page.$("#app")).contentFrame();
    assert(frame, "the app's iframe has a frame");
  });
  if (!frame) return;

  await check("widget: ui/initialize (2026-01-26, appInfo, appCapabilities) then ui/notifications/initialized", async () => {
    const s = await page.evaluate(() => window.harness.state("everything"));
    const init = s.inbound.find((m) => m.method === "ui/initialize");
    assert(init && init.id !== undefined, "ui/initialize request");
    eq(init.params.protocolVersion, "2026-01-26", "protocolVersion");
    assert(typeof init.params.appInfo?.name === "string" && init.params.appInfo.name, "appInfo.name");
    assert(typeof init.params.appCapabilities === "object", "appCapabilities");
    const answered = s.outbound.findIndex((m) => m.id === init.id && m.result);
    assert(answered >= 0, "the host answered ui/initialize");
    const inited = s.inbound.findIndex((m) => m.method === "ui/notifications/initialized");
    assert(inited > s.inbound.indexOf(init), "initialized after initialize");
    assert(s.initialized, "AppBridge.oninitialized fired");
    eq(s.appInfo, init.params.appInfo, "AppBridge.getAppVersion()");
  });

  await check("widget: host theme applied (data-theme, color-scheme, variables, fonts)", async () => {
    const t = await inFrame(() => {
      const root = document.documentElement;
      const card = document.querySelector(".card") || document.body;
      return {
        theme: root.dataset.theme,
        scheme: root.style.colorScheme,
        ring: root.style.getPropertyValue("--color-ring-primary"),
        fonts: document.querySelectorAll("#__mcp-host-fonts").length,
        fontCss: document.getElementById("__mcp-host-fonts")?.textContent || "",
        bg: getComputedStyle(card).backgroundColor,
        ctxTheme: window.mcpApp.hostContext().theme,
      };
    });
    eq(t.theme, "dark", "data-theme");
    eq(t.scheme, "dark", "color-scheme");
    eq(t.ring, "light-dark(#6d28d9, #a78bfa)", "--color-ring-primary on the root");
    eq(t.fonts, 1, "one host fonts <style>");
    assert(t.fontCss.includes("Harness Sans"), "the host's font CSS");
    eq(t.bg, "rgb(27, 29, 36)", "the card's background: the host's dark --color-background-primary");
    eq(t.ctxTheme, "dark", "mcpApp.hostContext().theme");
  });

  await check("widget: clicking Add calls tools/call add through the host and renders 0.3", async () => {
    await frame.fill("#a", "0.1");
    await frame.fill("#b", "0.2");
    await frame.click("#add:not([disabled])", { timeout: 5000 });
    await frame.waitForFunction(() => document.getElementById("sum").textContent === "0.3", null, { timeout: 10000 });
    const s = await page.evaluate(() => window.harness.state("everything"));
    const call = s.inbound.find((m) => m.method === "tools/call");
    eq(call?.params, { name: "add", arguments: { a: 0.1, b: 0.2 } }, "the widget's tools/call");
    const answer = s.outbound.find((m) => m.id === call.id);
    eq(answer?.result?.content?.[0]?.text, "0.3", "the server's answer through the host");
    await page.waitForTimeout(150); // let the size-changed round settle before the picture
    const shot = path.join(OUT, "widget.png");
    await (await page.$("#app")).screenshot({ path: shot });
    console.log(`      screenshot: ${shot}`);
  });

  await check("widget: size-changed notifications resize the frame", async () => {
    const s = await page.evaluate(() => window.harness.state("everything"));
    assert(s.sizes.length >= 1, "at least one ui/notifications/size-changed");
    const last = s.sizes[s.sizes.length - 1];
    assert(last.width > 0 && last.height > 100, `size ${JSON.stringify(last)}`);
    const h = await page.evaluate(() => document.getElementById("app").style.height);
    eq(h, `${last.height}px`, "the iframe's height");
  });

  await check("widget: tool-input and tool-result notifications render", async () => {
    await page.evaluate(async () => {
      await window.harness.sendToolInput("everything", { arguments: { a: 1.5, b: 2.25 } });
      await window.harness.sendToolResult("everything", { content: [{ type: "text", text: "3.75" }] });
    });
    await frame.waitForFunction(() => document.getElementById("sum").textContent === "3.75", null, { timeout: 5000 });
    eq(await frame.inputValue("#a"), "1.5", "tool-input filled a");
    eq(await frame.inputValue("#b"), "2.25", "tool-input filled b");
  });

  await check("widget: host-context-changed merges and re-applies the theme", async () => {
    const seen = await inFrame(() => {
      window.__contextUpdates = [];
      window.mcpApp.onHostContextChanged((p) =>
        window.__contextUpdates.push({ p, themeAtHandler: document.documentElement.dataset.theme }),
      );
    });
    await page.evaluate(() => window.harness.setHostContext("everything", { theme: "light" }));
    await frame.waitForFunction(() => document.documentElement.dataset.theme === "light", null, { timeout: 5000 });
    const t = await inFrame(() => ({
      scheme: document.documentElement.style.colorScheme,
      ctx: window.mcpApp.hostContext(),
      updates: window.__contextUpdates,
      bg: getComputedStyle(document.querySelector(".card") || document.body).backgroundColor,
    }));
    eq(t.scheme, "light", "color-scheme");
    eq(t.updates, [{ p: { theme: "light" }, themeAtHandler: "light" }], "the handler saw the applied update");
    eq(t.ctx.theme, "light", "merged theme");
    eq(t.ctx.displayMode, "inline", "fields not in the update kept");
    eq(t.bg, "rgb(255, 255, 255)", "light-dark() now resolves to the light value");
    void seen;
    await (await page.$("#app")).screenshot({ path: path.join(OUT, "widget-light.png") });
  });

  await check("widget: open-link, message, update-model-context, display mode, resources/read, ping, log", async () => {
    const uri = w.uri;
    const r = await inFrame(async (uri) => {
      const app = window.mcpApp;
      app.log({ level: "info", data: "hello from the widget" });
      return {
        link: await app.openLink({ url: "https://example.com/docs" }),
        message: await app.message({ role: "user", content: [{ type: "text", text: "hi" }] }),
        context: await app.updateModelContext({ content: [{ type: "text", text: "ctx" }] }),
        mode: await app.requestDisplayMode({ mode: "fullscreen" }),
        read: (await app.readResource({ uri })).contents[0].mimeType,
        ping: await app.request("ping"),
      };
    }, uri);
    eq(r.mode, { mode: "fullscreen" }, "ui/request-display-mode result");
    eq(r.read, MIME, "resources/read through the host");
    eq(r.ping, {}, "ping");
    const s = await page.evaluate(() => window.harness.state("everything"));
    const kinds = s.events.map((e) => e.kind);
    for (const k of ["open-link", "message", "update-model-context", "request-display-mode", "log"]) {
      assert(kinds.includes(k), `the host saw ${k}: ${kinds}`);
    }
    eq(s.events.find((e) => e.kind === "open-link").params, { url: "https://example.com/docs" }, "open-link params");
    eq(s.events.find((e) => e.kind === "log").params, { level: "info", data: "hello from the widget" }, "log params");
  });

  await check("widget: typed errors (host error, E_TIMEOUT + notifications/cancelled, E_SEND, E_SATURATED)", async () => {
    const r = await inFrame(async () => {
      const app = window.mcpApp;
      const code = (p) => p.then(() => "resolved", (e) => ({ code: e.code, typed: e instanceof app.McpAppError }));
      const unknown = await code(app.request("no/such-method", {}));
      const timeout = await code(app.openLink({ url: "https://hang.invalid/timeout" }, 300));
      const send = await code(app.callTool({ name: "echo", arguments: { f: () => 1 } }));
      window.__pending = [];
      for (let i = 0; i < 64; i++) {
        window.__pending.push(code(app.openLink({ url: "https://hang.invalid/" + i }, 60000)));
      }
      const saturated = await code(app.openLink({ url: "https://example.com/65th" }));
      return { unknown, timeout, send, saturated };
    });
    eq(r.unknown.typed, true, "a host error is an McpAppError");
    eq(r.unknown.code, -32601, "the host's JSON-RPC error code");
    eq(r.timeout, { code: "E_TIMEOUT", typed: true }, "a request the host never answers");
    eq(r.send, { code: "E_SEND", typed: true }, "params that cannot be cloned");
    eq(r.saturated, { code: "E_SATURATED", typed: true }, "the 65th request in flight");
    // postMessage is asynchronous: the cancellation may reach the host after the rejection
    // reached the widget's code, so wait for it (a bounded wait, not a timing check).
    let s, cancel;
    for (let i = 0; i < 40 && !cancel; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 50));
      s = await page.evaluate(() => window.harness.state("everything"));
      cancel = s.inbound.find((m) => m.method === "notifications/cancelled");
    }
    const timedOut = s.inbound.find((m) => m.method === "ui/open-link" && m.params.url.endsWith("/timeout"));
    eq(cancel?.params?.requestId, timedOut.id, "notifications/cancelled names the timed-out request");
    assert(!s.events.some((e) => e.params?.url === "https://example.com/65th"), "the 65th was never posted");
  });

  await check("widget: messages not from the parent, not JSON-RPC 2.0, or late are ignored", async () => {
    await inFrame(() => {
      window.__errors = [];
      window.addEventListener("error", (e) => window.__errors.push(String(e.message)));
      // Same window, not the parent: a forged result must not render.
      const forged = { content: [{ type: "text", text: "FORGED" }] };
      window.postMessage({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: forged }, "*");
    });
    const s = await page.evaluate(() => window.harness.state("everything"));
    const timedOut = s.inbound.find((m) => m.method === "ui/open-link" && m.params.url.endsWith("/timeout"));
    await page.evaluate((lateId) => {
      const win = document.getElementById("app").contentWindow;
      const old = { content: [{ type: "text", text: "OLD" }] };
      win.postMessage({ jsonrpc: "1.0", method: "ui/notifications/tool-result", params: old }, "*");
      // The answer to the request that timed out, long after its promise rejected.
      win.postMessage({ jsonrpc: "2.0", id: lateId, result: { late: true } }, "*");
    }, timedOut.id);
    await page.waitForTimeout(200);
    eq(await frame.textContent("#sum"), "3.75", "the rendered result is unchanged");
    eq(await inFrame(() => window.__errors), [], "errors in the widget's frame");
  });

  await check("widget: onMessage receives the host's notifications/message; its unsubscribe works", async () => {
    await inFrame(() => {
      window.__messages = [];
      window.__offMessage = window.mcpApp.onMessage((p) => window.__messages.push(p));
    });
    const params = { level: "warning", logger: "host", data: { note: "from the host" } };
    await page.evaluate((p) => window.harness.notify("everything", "notifications/message", p), params);
    await frame.waitForFunction(() => window.__messages.length > 0, null, { timeout: 5000 });
    eq(await inFrame(() => window.__messages), [params], "what the handler saw");
    await inFrame(() => window.__offMessage());
    await page.evaluate(() => window.harness.notify("everything", "notifications/message", { level: "info", data: "after off" }));
    await page.waitForTimeout(100);
    eq(await inFrame(() => window.__messages.length), 1, "no call after unsubscribing");
  });

  await check("widget: connect() misuse is refused with E_ARGS and posts nothing, even once connected", async () => {
    const before = (await page.evaluate(() => window.harness.state("everything"))).inbound.length;
    const r = await inFrame(async () => {
      const app = window.mcpApp;
      const code = (f) => {
        try {
          return f().then(() => "resolved", (e) => (e instanceof app.McpAppError ? e.code : `untyped ${e}`));
        } catch (e) {
          return Promise.resolve(`threw ${e}`);
        }
      };
      return {
        mixed: await code(() => app.connect({ appInfo: { name: "x" }, availableDisplayModes: ["inline"] })),
        optionsThenMore: await code(() => app.connect({ appCapabilities: {} }, 5000)),
        notObject: await code(() => app.connect("inline")),
        array: await code(() => app.connect(["inline"])),
        badTimeout: await code(() => app.connect({}, "5000")),
        zeroTimeout: await code(() => app.connect({ timeoutMs: 0 })),
        badAppInfo: await code(() => app.connect({}, 5000, "demo")),
        badAutoResize: await code(() => app.connect({ autoResize: "no" })),
        tooMany: await code(() => app.connect({}, 5000, {}, true)),
        message: await app.connect({ appInfo: {}, tools: {} }).catch((e) => e.message),
        again: await code(() => app.connect({ appInfo: { name: "x" } })),
      };
    });
    const { message, again, ...refused } = r;
    for (const [k, v] of Object.entries(refused)) eq(v, "E_ARGS", k);
    assert(/appInfo/.test(message) && /tools/.test(message) && /appCapabilities/.test(message), `message: ${message}`);
    eq(again, "resolved", "a well-formed connect() after the handshake: the first handshake's promise");
    const after = (await page.evaluate(() => window.harness.state("everything"))).inbound;
    eq(after.slice(before).filter((m) => m.method === "ui/initialize").length, 0, "ui/initialize posted by misuse");
  });

  await check("widget: ui/resource-teardown waits for the handler, answers {}, fails in-flight with E_TEARDOWN", async () => {
    await inFrame(() => {
      window.__saved = false;
      window.mcpApp.onResourceTeardown(
        () => new Promise((r) => setTimeout(() => { window.__saved = true; r(); }, 200)),
      );
    });
    const answer = await page.evaluate(() => window.harness.teardown("everything"));
    eq(answer, {}, "the teardown result");
    const r = await inFrame(async () => ({
      saved: window.__saved,
      pending: await Promise.all(window.__pending),
      after: await window.mcpApp.callTool({ name: "add", arguments: { a: 1, b: 1 } }).then(() => "resolved", (e) => e.code),
    }));
    eq(r.saved, true, "the handler ran to completion before the answer");
    eq(r.pending.length, 64, "requests in flight");
    assert(r.pending.every((p) => p.code === "E_TEARDOWN"), `in-flight requests: ${JSON.stringify(r.pending.slice(0, 3))}`);
    eq(r.after, "E_TEARDOWN", "a request after teardown");
  });

  // ---- connect()'s two forms, each in a fresh page of its own ----
  const mountPage = async (id, script, bridge) => {
    await page.evaluate(([id, html, bridge]) => window.harness.mountPage(id, { html, bridge }), [id, pageWith(script), bridge]);
    const f = await (await page.$(`#${id}`)).contentFrame();
    await f.waitForFunction(() => window.__connect !== undefined, null, { timeout: 10000 });
    return { result: await f.evaluate(() => window.__connect), state: await page.evaluate((id) => window.harness.state(id), id) };
  };
  const record = `.then((r) => { window.__connect = { ok: r.protocolVersion }; },
    (e) => { window.__connect = { code: e.code, message: e.message }; });`;
  await check("widget: connect({availableDisplayModes}) (seed B's example) declares those appCapabilities", async () => {
    const { result, state } = await mountPage("form-seed", `window.mcpApp.connect({ availableDisplayModes: ["inline"] })${record}`, true);
    eq(result, { ok: "2026-01-26" }, "connect()");
    assert(state.initialized, "the host saw ui/notifications/initialized");
    eq(state.appCapabilities, { availableDisplayModes: ["inline"] }, "appCapabilities the host saw");
    eq(state.appInfo, { name: "mcp-app", version: "0.0.0" }, "appInfo defaults");
  });
  await check("widget: connect(appCapabilities, timeoutMs, appInfo) positionally", async () => {
    const caps = { tools: { listChanged: true }, availableDisplayModes: ["inline", "fullscreen"] };
    const { result, state } = await mountPage(
      "form-positional",
      `window.mcpApp.connect(${JSON.stringify(caps)}, 5000, { name: "positional", version: "" })${record}`,
      true,
    );
    eq(result, { ok: "2026-01-26" }, "connect()");
    eq(state.appCapabilities, caps, "appCapabilities the host saw");
    eq(state.appInfo, { name: "positional", version: "0.0.0" }, "appInfo, an empty version defaulted");
    assert(state.inbound.some((m) => m.method === "ui/notifications/size-changed"), "auto-resize on by default");
  });
  await check("widget: connect({appCapabilities, appInfo, timeoutMs, autoResize}), the options form", async () => {
    const { result, state } = await mountPage(
      "form-options",
      `window.mcpApp.connect({ appCapabilities: { availableDisplayModes: ["fullscreen"] },
         appInfo: { name: "options", version: "3.0.0" }, timeoutMs: 5000, autoResize: false })${record}`,
      true,
    );
    eq(result, { ok: "2026-01-26" }, "connect()");
    eq(state.appCapabilities, { availableDisplayModes: ["fullscreen"] }, "appCapabilities the host saw");
    eq(state.appInfo, { name: "options", version: "3.0.0" }, "appInfo");
    await page.waitForTimeout(200);
    const s = await page.evaluate(() => window.harness.state("form-options"));
    eq(s.inbound.filter((m) => m.method === "ui/notifications/size-changed").length, 0, "size-changed with autoResize: false");
  });
  await check("widget: a host that never answers: the positional, then the options timeoutMs ends connect()", async () => {
    const { result, state } = await mountPage(
      "form-timeout",
      `const t0 = performance.now();
       const app = window.mcpApp;
       const timed = (p) => p.then(() => "resolved", (e) => ({ code: e.code, ms: performance.now() - t0 }));
       timed(app.connect({ availableDisplayModes: ["inline"] }, 300)).then((first) =>
         timed(app.connect({ timeoutMs: 300 })).then((second) => { window.__connect = { first, second }; }));`,
      false,
    );
    eq(result.first.code, "E_TIMEOUT", "the positional connect");
    eq(result.second.code, "E_TIMEOUT", "the options connect, tried again");
    assert(result.second.ms < 5000, `both within their 300 ms timeouts, not 30 s: ${JSON.stringify(result)}`);
    const inits = state.inbound.filter((m) => m.method === "ui/initialize");
    eq(inits.map((m) => m.params.appCapabilities), [{ availableDisplayModes: ["inline"] }, {}], "the two ui/initialize");
  });
  await page.evaluate(() => ["form-seed", "form-positional", "form-options", "form-timeout"].forEach((id) => document.getElementById(id).remove()));

  // ---- the reverse: the official App class in an app our server serves ----
  await page.evaluate(() => document.getElementById("app").remove());
  await check("official App: handshake with AppBridge, app read from apps-probe (text/html;profile=mcp-app)", async () => {
    const s = await page.evaluate(() => window.harness.mount("probe", { mcpPath: "/probe/mcp", needle: "official-ext-apps-app" }));
    eq(s.uri, "ui://apps-probe/official-app", "the linked app");
    eq(s.mimeType, MIME, "mimeType");
    eq(s.contentsMeta, { ui: { prefersBorder: true } }, "the contents' _meta");
    eq(s.appInfo, { name: "official-ext-apps-app", version: "2.0.4" }, "appInfo");
    frame = await (await page.$("#app")).contentFrame();
  });
  await check("official App: callServerTool(echo) and readServerResource through the host render", async () => {
    await frame.waitForFunction(() => document.getElementById("read").textContent !== "–", null, { timeout: 10000 });
    eq(await frame.textContent("#out"), "echo: hello from the official App", "echo result");
    eq(await frame.textContent("#read"), MIME, "resources/read result");
    assert((await frame.textContent("#status")).startsWith("connected to ext-apps-browser-harness"), "status");
  });
  await check("official App: the host calls the linked tool on our server and forwards its result", async () => {
    await page.evaluate(async () => {
      const result = await window.harness.callTool("probe", { name: "open_probe_app", arguments: {} });
      await window.harness.sendToolInput("probe", { arguments: {} });
      await window.harness.sendToolResult("probe", result);
    });
    await frame.waitForFunction(() => document.getElementById("tool-result").textContent !== "–", null, { timeout: 5000 });
    eq(await frame.textContent("#tool-result"), "The probe app is open.", "tool result");
    await (await page.$("#app")).screenshot({ path: path.join(OUT, "official-app.png") });
  });

  await check("no uncaught errors in the page or the frames", async () => {
    eq(pageErrors, [], "page errors");
  });
}

const deadline = setTimeout(() => {
  console.log(`FAIL  the run passed its ${DEADLINE_MS} ms deadline`);
  cleanup().finally(() => process.exit(1));
}, DEADLINE_MS);

const started = Date.now();
main()
  .catch((e) => {
    failures++;
    console.log(`FAIL  harness: ${e?.stack || e}`);
  })
  .finally(async () => {
    clearTimeout(deadline);
    await cleanup();
    console.log(`browser: ${failures ? `${failures} check(s) FAILED` : "all checks passed"} in ${Date.now() - started} ms`);
    process.exit(failures ? 1 : 0);
  });
