// The reverse check's app: the official ext-apps `App` class, bundled by esbuild into one inline
// script of an HTML page (run.mjs) that our apps-probe server serves as its `ui://` resource.
import { App, applyDocumentTheme, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";

const out = document.getElementById("out");
const status = document.getElementById("status");
const app = new App({ name: "official-ext-apps-app", version: "2.0.4" }, {}, { autoResize: true });
app.ontoolresult = (result) => {
  document.getElementById("tool-result").textContent = result.content?.[0]?.text ?? "";
};
app.onhostcontextchanged = (ctx) => {
  if (ctx.theme) applyDocumentTheme(ctx.theme);
};

try {
  await app.connect();
  const ctx = app.getHostContext() || {};
  if (ctx.theme) applyDocumentTheme(ctx.theme);
  if (ctx.styles?.variables) applyHostStyleVariables(ctx.styles.variables);
  status.textContent = `connected to ${app.getHostVersion()?.name}`;
  const result = await app.callServerTool({ name: "echo", arguments: { text: "hello from the official App" } });
  out.textContent = result.content?.[0]?.text ?? "(no text)";
  const read = await app.readServerResource({ uri: "ui://apps-probe/official-app" });
  document.getElementById("read").textContent = read.contents?.[0]?.mimeType ?? "";
} catch (e) {
  status.textContent = `failed: ${e?.message ?? e}`;
}
