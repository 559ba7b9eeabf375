// The output-schema wrapper cases (tests/wrap/cases.json, with the wire schemas the
// wrap_cases example added) against the TypeScript SDK's own validator, the way its Client
// uses it: one AjvJsonSchemaValidator for every tool, getValidator(tool.outputSchema), then
// the returned function on structuredContent. Also against Ajv's 2020-12 class with the
// SDK's options, for the 2020-12 cases (the SDK's default class is draft-07).
//
// Usage: node tests/wrap/check.mjs WRAPPED.json TS_DIR
//   TS_DIR: a directory whose node_modules holds @modelcontextprotocol/sdk (tests/interop/ts).
// Prints one line per case and validator, then `wrap-ts: N passed, M failed`.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [wrappedPath, tsDir] = process.argv.slice(2);
if (!wrappedPath || !tsDir) {
    console.error('usage: node check.mjs WRAPPED.json TS_DIR');
    process.exit(2);
}
const requireFromTs = createRequire(path.join(path.resolve(tsDir), 'package.json'));
const load = async (spec, from = requireFromTs) => import(pathToFileURL(from.resolve(spec)).href);

const { AjvJsonSchemaValidator } = await load('@modelcontextprotocol/sdk/validation/ajv');
// Ajv and ajv-formats as the SDK itself resolves them.
const requireFromSdk = createRequire(requireFromTs.resolve('@modelcontextprotocol/sdk/validation/ajv'));
const Ajv2020 = (await load('ajv/dist/2020.js', requireFromSdk)).default.default;
const addFormats = (await load('ajv-formats', requireFromSdk)).default.default;

const URI_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

function sdkValidator() {
    const v = new AjvJsonSchemaValidator();
    return (schema) => {
        const f = v.getValidator(schema);
        return (instance) => f(instance).valid;
    };
}

function ajv2020Validator() {
    // The SDK's createDefaultAjvInstance options, on the 2020-12 class.
    const ajv = new Ajv2020({ strict: false, validateFormats: true, validateSchema: false, allErrors: true });
    addFormats(ajv);
    return (schema) => {
        const f = ajv.compile(schema);
        return (instance) => f(instance);
    };
}

const doc = JSON.parse(readFileSync(wrappedPath, 'utf8'));
// One instance for all wrappers (a client listing every tool), another for the bare schemas,
// so a bare schema's $id never meets its bundled copy.
const validators = [
    { name: 'ts-sdk', wrapped: sdkValidator(), bare: sdkValidator(), applies: () => true },
    { name: 'ajv2020', wrapped: ajv2020Validator(), bare: ajv2020Validator(), applies: (c) => c.wrapped.$schema === URI_2020_12 },
];

let passed = 0;
let failed = 0;
for (const validator of validators) {
    for (const c of doc.cases) {
        if (!validator.applies(c)) continue;
        const problems = checkCase(validator, c);
        const label = `${validator.name} ${c.name}`;
        if (problems.length === 0) {
            passed++;
            const note = c.known_divergence?.[validator.name];
            console.log(`ok    ${label}${note ? ` (known divergence of the bare schema: ${note})` : ''}`);
        } else {
            failed++;
            console.log(`FAIL  ${label}`);
            for (const p of problems) console.log(`        ${p}`);
        }
    }
}
console.log(`wrap-ts: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);

function checkCase(validator, c) {
    const problems = [];
    let wrapped;
    try {
        wrapped = validator.wrapped(c.wrapped);
    } catch (e) {
        return [`the wrapper does not compile: ${e.message}`];
    }
    let bare = null;
    try {
        bare = validator.bare(c.app);
    } catch (e) {
        // The SDK's getValidator takes only object schemas (`'$id' in schema`); a boolean
        // app schema has no bare verdict there, only the expected one.
        if (typeof c.app !== 'boolean') problems.push(`the bare schema does not compile: ${e.message}`);
    }
    const divergent = c.known_divergence?.[validator.name];
    let diverged = false;
    for (const { value, valid } of c.values) {
        const w = wrapped({ value });
        if (bare !== null) {
            const b = bare(value);
            if (b !== w) problems.push(`wrapper says ${w} but the bare schema ${b} for ${JSON.stringify(value)}`);
        }
        if (w !== valid) {
            if (divergent) diverged = true;
            else problems.push(`expected ${valid}, got ${w} for {"value": ${JSON.stringify(value)}}`);
        }
    }
    if (divergent && !diverged) problems.push('known_divergence is stale: every verdict matched');
    for (const { envelope, valid } of c.envelopes ?? []) {
        const w = wrapped(envelope);
        if (w !== valid) problems.push(`expected ${valid}, got ${w} for ${JSON.stringify(envelope)}`);
    }
    return problems;
}
