"""The output-schema wrapper cases against the Python SDK's own validator.

Reads tests/wrap/cases.json with the wire schemas the wrap_cases example added, and validates
through `mcp.client.session.ClientSession._output_schema_validator`, the method the SDK's
client compiles a tool's outputSchema with (validator class chosen by `$schema`, the schema
checked against its metaschema, an empty registry so no `$ref` is fetched).

Usage: python check.py WRAPPED.json
Prints one line per case, then `wrap-python: N passed, M failed`.
"""

import json
import sys
from types import SimpleNamespace

from mcp.client.session import ClientSession


def compiler():
    # The method keeps its validators in `self._tool_output_validators`, keyed by tool name;
    # a fresh namespace per schema keeps one case's validator from answering for another.
    def compile_schema(name, schema):
        holder = SimpleNamespace(_tool_output_validators={})
        return ClientSession._output_schema_validator(holder, name, schema)

    return compile_schema


def verdict(validator, instance):
    return not any(True for _ in validator.iter_errors(instance))


def check_case(compile_schema, case):
    problems = []
    try:
        wrapped = compile_schema(case["name"], case["wrapped"])
        bare = compile_schema(case["name"] + "/bare", case["app"])
    except Exception as e:  # the SDK raises RuntimeError for a schema it refuses
        return [f"does not compile: {e}"]
    divergent = (case.get("known_divergence") or {}).get("python-sdk")
    diverged = False
    for item in case["values"]:
        value, want = item["value"], item["valid"]
        try:
            w = verdict(wrapped, {"value": value})
            b = verdict(bare, value)
        except Exception as e:  # an unresolvable $ref surfaces while validating
            problems.append(f"validating {json.dumps(value)} raised {type(e).__name__}: {e}")
            continue
        if w != b:
            problems.append(f"wrapper says {w} but the bare schema {b} for {json.dumps(value)}")
        if w != want:
            if divergent:
                diverged = True
            else:
                problems.append(f'expected {want}, got {w} for {{"value": {json.dumps(value)}}}')
    if divergent and not diverged:
        problems.append("known_divergence is stale: every verdict matched")
    for item in case.get("envelopes") or []:
        envelope, want = item["envelope"], item["valid"]
        try:
            w = verdict(wrapped, envelope)
        except Exception as e:
            problems.append(f"validating {json.dumps(envelope)} raised {type(e).__name__}: {e}")
            continue
        if w != want:
            problems.append(f"expected {want}, got {w} for {json.dumps(envelope)}")
    return problems


def main():
    if len(sys.argv) != 2:
        print("usage: python check.py WRAPPED.json", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    compile_schema = compiler()
    passed = failed = 0
    for case in doc["cases"]:
        problems = check_case(compile_schema, case)
        label = f"python-sdk {case['name']}"
        if problems:
            failed += 1
            print(f"FAIL  {label}")
            for p in problems:
                print(f"        {p}")
        else:
            passed += 1
            print(f"ok    {label}")
    print(f"wrap-python: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
