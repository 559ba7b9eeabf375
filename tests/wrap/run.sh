#!/usr/bin/env bash
# The output-schema wrapper (mcp-proto/src/wrap.rs) against the official clients' validators:
# the TypeScript SDK's Ajv (and Ajv's 2020-12 class) and the Python SDK's jsonschema. The
# mcp-tests `wrap` test checks the same cases with jsonschema, the engine's own validator.
#
# Usage: bash tests/wrap/run.sh
#   1. `cargo run -p mcp-proto --example wrap_cases` wraps every schema in tests/wrap/cases.json
#      into target/wrap/wrapped.json (honours CARGO_TARGET_DIR for the build);
#   2. node tests/wrap/check.mjs and python tests/wrap/check.py check every case there.
#
# Reuses the interop installs (target/interop/venv, tests/interop/ts/node_modules) when they
# are up to date, and makes them the way tests/interop/run.sh does when they are not, with
# the same stamps, so either script reuses what the other installed.
# Environment: PYTHON as in tests/interop/run.sh. Exits non-zero if any case fails anywhere.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"
WRAP_DIR="$ROOT/tests/wrap"
INTEROP_DIR="$ROOT/tests/interop"
VENV="$ROOT/target/interop/venv"
TS_DIR="$INTEROP_DIR/ts"
OUT="$ROOT/target/wrap"

log() { printf '==> %s\n' "$*"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$OUT"

# ---- Python venv (shared with tests/interop/run.sh) --------------------------
# shellcheck source=tests/interop/venv.sh
source "$INTEROP_DIR/venv.sh"
interop_venv "$VENV"

# ---- npm (as tests/interop/run.sh) -------------------------------------------
NPM_STAMP="$TS_DIR/node_modules/.interop-lock.sha256"
want="$(sha "$TS_DIR/package-lock.json")"
if [[ -f "$NPM_STAMP" && "$(cat "$NPM_STAMP")" == "$want" \
    && -f "$TS_DIR/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
    log "ts: reusing $TS_DIR/node_modules"
else
    log "ts: npm ci"
    (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$NPM_STAMP"
fi

# ---- wrap and check ----------------------------------------------------------------
log "wrapping tests/wrap/cases.json"
cargo run --quiet -p mcp-proto --example wrap_cases -- "$WRAP_DIR/cases.json" >"$OUT/wrapped.json"

log "$("$VENV/bin/python" -c 'import importlib.metadata as m; print("python: mcp", m.version("mcp"), "jsonschema", m.version("jsonschema"))')"
log "ts: @modelcontextprotocol/sdk $(node -p "require('$TS_DIR/node_modules/@modelcontextprotocol/sdk/package.json').version"), ajv $(node -p "require('$TS_DIR/node_modules/ajv/package.json').version")"
failures=0
node "$WRAP_DIR/check.mjs" "$OUT/wrapped.json" "$TS_DIR" || failures=$((failures + 1))
"$VENV/bin/python" "$WRAP_DIR/check.py" "$OUT/wrapped.json" || failures=$((failures + 1))
if [[ $failures -ne 0 ]]; then
    echo "wrap: $failures of 2 validator runs FAILED"
    exit 1
fi
echo "wrap: both validator runs passed"
