#!/usr/bin/env bash
# The browser proof of MCP Apps: headless Debian Chromium (/usr/bin/chromium) loads a harness page
# that hosts the official ext-apps host side (AppBridge, @modelcontextprotocol/ext-apps 2.0.4) and
# the official MCP client (@modelcontextprotocol/client), connected over Streamable HTTP to
#   1. the `everything` example: its ui:// app runs our widget client (mcp-server/assets/mcp-app.js);
#      the widget initializes, is clicked, calls `add` through the host and renders the sum,
#      connect()'s options and positional forms (and its refusals) run in pages of their own, and
#      the client's whole surface (requests, notifications, theme, typed errors, teardown) is
#      checked against the official host;
#   2. the test-only apps-probe server: its ui:// app runs the official ext-apps `App` class.
# Checks and their ok/FAIL lines: tests/browser/run.mjs. Screenshots: target/browser/*.png
# (widget.png: the widget with its result, in the host's dark theme).
#
# Usage: bash tests/browser/run.sh [EVERYTHING_BINARY [APPS_PROBE_BINARY]]
#   defaults: target/debug/examples/everything, target/debug/apps-probe. Builds nothing; build
#   them first: cargo build -p mcp-tokio --example everything -p mcp-tests --bin apps-probe
#
# Environment: CHROMIUM (default /usr/bin/chromium), BROWSER_DEADLINE_MS (default 90000).
# Side effects: npm packages in tests/browser/node_modules (reinstalled when package-lock.json
# changes), target/browser/ (screenshots and the bundled official-app.html).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"
DIR="$ROOT/tests/browser"
OUT="$ROOT/target/browser"
EVERYTHING="${1:-target/debug/examples/everything}"
PROBE="${2:-target/debug/apps-probe}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

die() { printf 'browser: error: %s\n' "$*" >&2; exit 1; }
for bin in "$EVERYTHING" "$PROBE"; do
    [[ -x "$bin" ]] || die "$bin not found or not executable (build it first: cargo build -p mcp-tokio --example everything -p mcp-tests --bin apps-probe)"
done
[[ -x "$CHROMIUM" ]] || die "$CHROMIUM not found (apt-get install -y --no-install-recommends chromium)"
"$CHROMIUM" --version

# npm ci only when the lock file changed since the last install; no install scripts (esbuild's
# binary comes from its platform package, and playwright-core downloads no browser).
stamp="$DIR/node_modules/.lock-stamp"
if [[ ! -f "$stamp" ]] || ! cmp -s "$stamp" "$DIR/package-lock.json"; then
    (cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp "$DIR/package-lock.json" "$stamp"
fi

mkdir -p "$OUT"
rm -f "$OUT"/*.png
CHROMIUM="$CHROMIUM" node "$DIR/run.mjs" "$(realpath "$EVERYTHING")" "$(realpath "$PROBE")" "$OUT"
