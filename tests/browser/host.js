// The host side of the browser proof, bundled for the page by esbuild (see run.mjs): the official
// TypeScript MCP client over Streamable HTTP to one of our servers, and the official ext-apps
// AppBridge rendering that server's app in a sandboxed iframe. run.mjs drives it through
// `window.harness` and reads the iframe's DOM itself.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const HOST_INFO = { name: "ext-apps-browser-harness", version: "1.0.0" };

// A dark host with its own palette and font, so the widget's theming is visible and checkable.
const HOST_CONTEXT = {
  theme: "dark",
  displayMode: "inline",
  availableDisplayModes: ["inline", "fullscreen"],
  containerDimensions: { width: 520, maxHeight: 900 },
  locale: "en-US",
  platform: "web",
  styles: {
    variables: {
      "--color-background-primary": "light-dark(#ffffff, #1b1d24)",
      "--color-background-secondary": "light-dark(#f3f4f6, #242833)",
      "--color-text-primary": "light-dark(#111318, #f1f2f5)",
      "--color-text-secondary": "light-dark(#5a6070, #a7adba)",
      "--color-border-primary": "light-dark(#dcdfe5, #343a47)",
      "--color-ring-primary": "light-dark(#6d28d9, #a78bfa)",
      "--font-sans": '"Harness Sans", system-ui, sans-serif',
    },
    css: { fonts: '@font-face { font-family: "Harness Sans"; src: local("DejaVu Sans"); }' },
  },
};

// The spec's CSP for an app's frame, from the resource's `_meta.ui.csp` (empty: the restrictive
// default), delivered in a <meta> element since a srcdoc frame has no response headers.
function cspFor(csp = {}) {
  const res = (csp.resourceDomains || []).join(" ");
  return [
    "default-src 'none'",
    `script-src 'self' 'unsafe-inline' ${res}`,
    `style-src 'self' 'unsafe-inline' ${res}`,
    `connect-src 'self' ${(csp.connectDomains || []).join(" ")}`,
    `img-src 'self' data: ${res}`,
    `font-src 'self' ${res}`,
    `media-src 'self' data: ${res}`,
    `frame-src ${(csp.frameDomains || []).join(" ") || "'none'"}`,
    "object-src 'none'",
    `base-uri ${(csp.baseUriDomains || []).join(" ") || "'self'"}`,
  ].join("; ");
}

function withCsp(html, policy) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy.replace(/"/g, "&quot;")}">`;
  const head = /<head[^>]*>/i.exec(html);
  if (!head) return meta + html;
  const at = head.index + head[0].length;
  return html.slice(0, at) + meta + html.slice(at);
}

function decode(contents) {
  if (typeof contents.text === "string") return contents.text;
  const bytes = Uint8Array.from(atob(contents.blob), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

async function connect(mcpPath) {
  const client = new Client(HOST_INFO, {
    capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpPath, location.href)));
  return client;
}

// Mounts an app of the server behind `mcpPath` (see `needle` below); resolves once the app sent
// `ui/notifications/initialized`. A link to a URL under `hang` is never answered.
async function mount({ mcpPath, needle, hang = "https://hang.invalid/" }) {
  const state = { inbound: [], outbound: [], events: [], sizes: [], initialized: false };
  const client = await connect(mcpPath);
  const { tools } = await client.listTools();
  // The first linked app whose page carries `needle` (a server may serve several apps).
  let tool, uri, contents;
  for (const t of tools.filter((t) => getToolUiResourceUri(t))) {
    const read = await client.readResource({ uri: getToolUiResourceUri(t) });
    if (decode(read.contents[0]).includes(needle)) {
      [tool, uri, contents] = [t, getToolUiResourceUri(t), read.contents[0]];
      break;
    }
  }
  if (!tool) throw new Error(`no tool on ${mcpPath} links an app whose page has ${JSON.stringify(needle)}`);
  state.tool = tool.name;
  state.uri = uri;
  state.mimeType = contents.mimeType;
  state.contentsMeta = contents._meta || null;
  const html = decode(contents);
  state.htmlBytes = html.length;

  const iframe = document.createElement("iframe");
  // Scripts only: an opaque origin, no access to the host page, its storage or its cookies.
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.id = "app";
  iframe.title = tool.name;
  iframe.style.cssText = "width:520px;height:200px;border:0;display:block;background:transparent";
  document.getElementById("stage").append(iframe);

  const bridge = new AppBridge(
    client,
    HOST_INFO,
    {
      openLinks: {},
      serverTools: {},
      serverResources: {},
      logging: {},
      message: { text: {} },
      updateModelContext: { text: {}, structuredContent: {} },
    },
    { hostContext: HOST_CONTEXT },
  );
  const record = (kind) => (params) => {
    state.events.push({ kind, params });
    return {};
  };
  bridge.onsizechange = ({ width, height }) => {
    state.sizes.push({ width, height });
    if (height != null) iframe.style.height = `${height}px`;
  };
  bridge.onopenlink = (params) => {
    state.events.push({ kind: "open-link", params });
    // A link the host never answers: the widget's own timeout has to end the request.
    return params.url.startsWith(hang) ? new Promise(() => {}) : {};
  };
  bridge.onmessage = async (params) => record("message")(params);
  bridge.onupdatemodelcontext = async (params) => record("update-model-context")(params);
  bridge.onrequestdisplaymode = async ({ mode }) => {
    state.events.push({ kind: "request-display-mode", params: { mode } });
    return { mode: HOST_CONTEXT.availableDisplayModes.includes(mode) ? mode : "inline" };
  };
  bridge.onloggingmessage = (params) => state.events.push({ kind: "log", params });
  const initialized = new Promise((resolve) => {
    bridge.oninitialized = () => {
      state.initialized = true;
      state.appInfo = bridge.getAppVersion();
      state.appCapabilities = bridge.getAppCapabilities();
      resolve();
    };
  });

  const transport = new PostMessageTransport(iframe.contentWindow, iframe.contentWindow);
  await bridge.connect(transport);
  // Every message both ways, for the checks on method names and shapes.
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    state.inbound.push(message);
    onmessage?.call(transport, message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    state.outbound.push(message);
    return send(message, options);
  };
  iframe.srcdoc = withCsp(html, cspFor(contents._meta?.ui?.csp));
  await initialized;
  return { bridge, client, state };
}

// A page of the test's own (our widget client inlined, then a script) in a frame with id `id`:
// with `bridge`, an AppBridge with no MCP client answers it (what it declared is recorded on
// `ui/notifications/initialized`); without, nothing answers, and every message the page posts
// is recorded. Resolves once the frame is mounted, not once it connected: a page may refuse to.
async function mountPage({ id, html, bridge: withBridge }) {
  const state = { inbound: [], initialized: false };
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.id = id;
  iframe.style.cssText = "width:520px;height:60px;border:0;display:block";
  document.getElementById("stage").append(iframe);
  let bridge = null;
  if (withBridge) {
    bridge = new AppBridge(null, HOST_INFO, { logging: {} }, { hostContext: HOST_CONTEXT });
    bridge.oninitialized = () => {
      state.initialized = true;
      state.appInfo = bridge.getAppVersion();
      state.appCapabilities = bridge.getAppCapabilities();
    };
    bridge.onsizechange = () => state.inbound.push({ method: "ui/notifications/size-changed" });
    const transport = new PostMessageTransport(iframe.contentWindow, iframe.contentWindow);
    await bridge.connect(transport);
    const onmessage = transport.onmessage;
    transport.onmessage = (message, extra) => {
      state.inbound.push(message);
      onmessage?.call(transport, message, extra);
    };
  } else {
    window.addEventListener("message", (event) => {
      if (event.source === iframe.contentWindow) state.inbound.push(event.data);
    });
  }
  iframe.srcdoc = withCsp(html, cspFor());
  return { bridge, state };
}

const mounted = {};
window.harness = {
  async mountPage(name, options) {
    mounted[name] = await mountPage({ id: name, ...options });
    return window.harness.state(name);
  },
  // A notification from the host to the app, any method (`notifications/message`, ...).
  notify(name, method, params) {
    return mounted[name].bridge.notification({ method, params });
  },
  async mount(name, options) {
    mounted[name] = await mount(options);
    return window.harness.state(name);
  },
  // JSON-safe copy of what the host saw.
  state(name) {
    return JSON.parse(JSON.stringify(mounted[name].state));
  },
  sendToolInput(name, params) {
    return mounted[name].bridge.sendToolInput(params);
  },
  sendToolResult(name, params) {
    return mounted[name].bridge.sendToolResult(params);
  },
  setHostContext(name, update) {
    mounted[name].bridge.setHostContext({ ...HOST_CONTEXT, ...update });
  },
  async teardown(name) {
    return mounted[name].bridge.teardownResource({});
  },
  async callTool(name, params) {
    return mounted[name].client.callTool(params);
  },
};
document.documentElement.dataset.ready = "1";
