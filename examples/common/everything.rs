//! The `everything` demo server, shared by the tokio and smol examples so both serve exactly the
//! same tools: `echo` and `add` (the benchmark contract), the result-only tool fixtures of the
//! MCP conformance suite, and `--extra-tools N` generated tools for exercising pagination.

use bigdecimal::BigDecimal;
use mcp_proto::server::{Server, ToolCall};
use mcp_proto::{Content, ResourceContents, Tool, ToolOutput};
use serde_json::{json, Number};
use std::str::FromStr;

/// Command-line options.
pub(crate) struct Args {
    pub(crate) extra_tools: usize,
}

const USAGE: &str = "usage: everything [--extra-tools N]\n\
    Serves the demo MCP server on stdin/stdout.\n\
    --extra-tools N   also register N generated tools (extra_0000 ...), to exercise pagination";

/// Parses `std::env::args`, or returns the message to print.
pub(crate) fn parse_args() -> Result<Args, String> {
    let mut args = Args { extra_tools: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--extra-tools" => {
                let n = it.next().ok_or_else(|| format!("--extra-tools needs a number\n{USAGE}"))?;
                args.extra_tools =
                    n.parse().map_err(|_| format!("--extra-tools: {n:?} is not a number\n{USAGE}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

/// Logs go to stderr: stdout carries only protocol bytes.
pub(crate) fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// First addend.
    a: Number,
    /// Second addend.
    b: Number,
}

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";
/// Eight samples of silence, 8-bit mono WAV.
const WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Exact decimal sum: the arguments keep every digit the client sent, so no f64 rounding here.
fn add(a: &Number, b: &Number) -> Result<String, String> {
    let parse =
        |n: &Number| BigDecimal::from_str(&n.to_string()).map_err(|e| format!("{n} is not a number: {e}"));
    Ok((parse(a)? + parse(b)?).normalized().to_plain_string())
}

fn no_args() -> serde_json::Value {
    json!({"type": "object", "properties": {}})
}

/// Builds the server with every demo tool.
pub(crate) fn build(args: &Args) -> Server {
    let mut builder = Server::builder("mcp-rs-everything", env!("CARGO_PKG_VERSION"))
        .instructions("Demo server of the mcp-rs workspace: echo, add and the conformance fixtures.")
        .typed_tool("echo", "Echoes back the given text", |a: EchoArgs, _: ToolCall| async move {
            ToolOutput::text(a.text)
        })
        .typed_tool(
            "add",
            "Adds two numbers exactly and returns the sum as text",
            |a: AddArgs, _| async move {
                match add(&a.a, &a.b) {
                    Ok(sum) => ToolOutput::text(sum),
                    Err(e) => ToolOutput::error(e),
                }
            },
        )
        .tool(Tool::new("test_simple_text", "Returns a simple text response", no_args()), |_| async {
            ToolOutput::text("This is a simple text response for testing.")
        })
        .tool(Tool::new("test_image_content", "Returns a 1x1 PNG image", no_args()), |_| async {
            ToolOutput::content(vec![Content::image(PNG, "image/png")])
        })
        .tool(Tool::new("test_audio_content", "Returns a short WAV clip", no_args()), |_| async {
            ToolOutput::content(vec![Content::audio(WAV, "audio/wav")])
        })
        .tool(
            Tool::new("test_embedded_resource", "Returns an embedded text resource", no_args()),
            |_| async {
                ToolOutput::content(vec![Content::resource(ResourceContents::text(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ))])
            },
        )
        .tool(
            Tool::new("test_multiple_content_types", "Returns text, an image and a resource", no_args()),
            |_| async {
                ToolOutput::content(vec![
                    Content::text("Multiple content types test:"),
                    Content::image(PNG, "image/png"),
                    Content::resource(ResourceContents::text(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    )),
                ])
            },
        )
        .tool(
            Tool::new("test_error_handling", "Always fails, as a tool result with isError", no_args()),
            |_| async { ToolOutput::error("This tool intentionally returns an error for testing") },
        )
        .tool(
            Tool::new(
                "json_schema_2020_12_tool",
                "Takes arguments described by a JSON Schema 2020-12 document with $defs",
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {
                        "address": {
                            "type": "object",
                            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                        }
                    },
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "additionalProperties": false
                }),
            ),
            |call: ToolCall| async move {
                ToolOutput::text(format!("Received: {}", serde_json::Value::Object(call.arguments)))
            },
        );
    for i in 0..args.extra_tools {
        let name = format!("extra_{i:04}");
        let tool = Tool::new(name.clone(), format!("Generated tool number {i}"), no_args());
        builder = builder.tool(tool, move |_| {
            let name = name.clone();
            async move { ToolOutput::text(format!("{name} called")) }
        });
    }
    match builder.build() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("everything: {e}");
            std::process::exit(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exact_sums() {
        let n = |s: &str| serde_json::Number::from_str(s).unwrap();
        use std::str::FromStr;
        assert_eq!(super::add(&n("2"), &n("3.5")).unwrap(), "5.5");
        assert_eq!(super::add(&n("1"), &n("2")).unwrap(), "3");
        assert_eq!(super::add(&n("9007199254740993"), &n("1")).unwrap(), "9007199254740994");
        assert_eq!(super::add(&n("0.1"), &n("0.2")).unwrap(), "0.3");
    }
}
