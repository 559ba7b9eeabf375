//! The replies of `! complete`, parsed into the engine's [`Reply`] values, and the automatic
//! answers of the fixtures.

use super::*;

/// The automatic answer of a fixture, or `None` when it has none (`slow`).
pub(super) fn auto(handler: Fixture, asked: &Asked) -> Option<Reply> {
    Some(match (handler, asked) {
        (Fixture::Tool(t), Asked::Tool(args)) => Reply::Tool(auto_reply(t, args)?),
        (f, Asked::Read { uri, variables }) => Reply::Resource(auto_read(f, uri, variables)?),
        (f, Asked::Prompt(args)) => Reply::Prompt(auto_prompt(f, args)?),
        (f, Asked::Complete { value }) => Reply::Completion(auto_complete(f, value)?),
        _ => return None,
    })
}

/// A failure, as the reply of the call's kind.
pub(super) fn failure(asked: &Asked, e: HandlerError) -> Reply {
    match asked {
        Asked::Tool(_) => Reply::Tool(Err(e)),
        Asked::Read { .. } => Reply::Resource(Err(e)),
        Asked::Prompt(_) => Reply::Prompt(Err(e)),
        Asked::Complete { .. } => Reply::Completion(Err(e)),
    }
}

pub(super) fn parse_reply(s: &str, handler: Fixture, asked: &Asked) -> Result<Reply, String> {
    let (kind, rest) = s.split_once(' ').map_or((s, ""), |(a, b)| (a, b.trim()));
    let json = |what: &str| -> Result<Value, String> {
        serde_json::from_str(rest).map_err(|e| format!("{what}: {e}"))
    };
    Ok(match kind {
        "text" => Reply::Tool(Ok(ToolOutput::text(json_string(rest)?.0))),
        "error-text" => Reply::Tool(Ok(ToolOutput::error(json_string(rest)?.0))),
        "structured" => Reply::Tool(Ok(ToolOutput::structured(json("structured")?))),
        "result" => Reply::Tool(Ok(tool_output(&json("result")?)?)),
        "failure" => failure(asked, tool_failure(&json("failure")?)?.into()),
        "contents" => {
            let v = json("contents")?;
            let items = v.as_array().ok_or("contents is a JSON array")?;
            Reply::Resource(Ok(items.iter().map(resource_contents).collect::<Result<_, _>>()?))
        }
        "prompt" => Reply::Prompt(Ok(prompt_output(&json("prompt")?)?)),
        "completion" => {
            let v = json("completion")?;
            let values = v.get("values").and_then(Value::as_array).ok_or("completion needs \"values\"")?;
            Reply::Completion(Ok(Completion {
                values: values.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect(),
                total: v.get("total").and_then(Value::as_u64),
                has_more: v.get("hasMore").and_then(Value::as_bool).unwrap_or(false),
            }))
        }
        "public-error" => {
            let (code, rest) = rest.split_once(' ').ok_or("public-error CODE \"message\" [{data}]")?;
            let code: i64 = code.parse().map_err(|_| format!("bad code {code}"))?;
            let (message, rest) = json_string(rest)?;
            let mut e = RpcError::new(mcp_proto::ErrorCode::Other(code), message);
            if !rest.trim().is_empty() {
                e = e.with_data(serde_json::from_str(rest.trim()).map_err(|e| format!("data: {e}"))?);
            }
            failure(asked, HandlerError::Public(e))
        }
        "private-error" => {
            failure(asked, HandlerError::private(json_string(rest).map(|x| x.0).unwrap_or_default()))
        }
        "panic" => failure(asked, HandlerError::Panicked),
        "cancelled" => failure(asked, HandlerError::Cancelled),
        "auto" => auto(handler, asked).ok_or("this call has no automatic behaviour")?,
        _ => return Err(format!("unknown reply kind {kind:?}")),
    })
}

/// A `TextResourceContents` or `BlobResourceContents` object.
fn resource_contents(r: &Value) -> Result<ResourceContents, String> {
    let rs = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
    let uri = rs("uri").ok_or_else(|| format!("contents {r} need \"uri\""))?;
    let mut contents = match (rs("text"), rs("blob")) {
        (Some(t), _) => ResourceContents::text(uri, "", t),
        (None, Some(bl)) => ResourceContents::blob(uri, "", bl),
        _ => return Err(format!("contents {r} need \"text\" or \"blob\"")),
    };
    contents.mime_type = rs("mimeType");
    contents.meta = r.get("_meta").and_then(Value::as_object).cloned();
    Ok(contents)
}

/// A `GetPromptResult`-shaped JSON object as a [`PromptOutput`].
fn prompt_output(v: &Value) -> Result<PromptOutput, String> {
    let mut out = PromptOutput {
        description: v.get("description").and_then(Value::as_str).map(str::to_owned),
        messages: Vec::new(),
    };
    for m in v.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let content = content_block(m.get("content").ok_or("a prompt message needs \"content\"")?)?;
        out.messages.push(match m.get("role").and_then(Value::as_str) {
            Some("user") => PromptMessage::user(content),
            Some("assistant") => PromptMessage::assistant(content),
            other => return Err(format!("a prompt message role is user or assistant, not {other:?}")),
        });
    }
    Ok(out)
}

/// A `CallToolResult`-shaped JSON object as a [`ToolOutput`].
/// `{"code", "message", "retryable"?, "diagnostics"?, "content"?: [...]}` as a [`ToolFailure`].
fn tool_failure(v: &Value) -> Result<ToolFailure, String> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).ok_or_else(|| format!("failure {v} needs {k:?}"));
    let mut f = ToolFailure::new(s("code")?, s("message")?)
        .retryable(v.get("retryable").and_then(Value::as_bool).unwrap_or(false));
    if let Some(d) = v.get("diagnostics") {
        f = f.with_diagnostics(d.clone());
    }
    let content = v.get("content").and_then(Value::as_array).into_iter().flatten();
    Ok(f.with_content(content.map(content_block).collect::<Result<_, _>>()?))
}

fn tool_output(v: &Value) -> Result<ToolOutput, String> {
    let mut out = ToolOutput::default();
    for block in v.get("content").and_then(Value::as_array).into_iter().flatten() {
        out.content.push(content_block(block)?);
    }
    out.structured = v.get("structuredContent").cloned();
    out.is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    out.meta = v.get("_meta").and_then(Value::as_object).cloned();
    Ok(out)
}

fn content_block(b: &Value) -> Result<Content, String> {
    let s = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_owned);
    let need = |k: &str| s(k).ok_or_else(|| format!("content block {b} needs {k:?}"));
    let annotations = b.get("annotations").and_then(Value::as_object).cloned();
    let meta = b.get("_meta").and_then(Value::as_object).cloned();
    Ok(match s("type").as_deref() {
        Some("text") => Content::Text { text: need("text")?, annotations, meta },
        Some("image") => {
            Content::Image { data: need("data")?, mime_type: need("mimeType")?, annotations, meta }
        }
        Some("audio") => {
            Content::Audio { data: need("data")?, mime_type: need("mimeType")?, annotations, meta }
        }
        // A reply's block-level annotations and `_meta` go on the block; `reference` (not
        // MCP wire, a transcript-only key) gives the link's own, so a transcript can show the
        // block overriding them.
        Some("resource_link") => {
            let r = b.get("reference");
            let obj = |k: &str| r.and_then(|r| r.get(k)).and_then(Value::as_object).cloned();
            Content::ResourceLink {
                link: ResourceLink {
                    uri: need("uri")?,
                    name: need("name")?,
                    title: s("title"),
                    description: s("description"),
                    mime_type: s("mimeType"),
                    size: b.get("size").and_then(Value::as_u64),
                    annotations: obj("annotations"),
                    meta: obj("_meta"),
                    icons: b.get("icons").cloned(),
                },
                annotations,
                meta,
            }
        }
        Some("resource") => {
            let r = b.get("resource").ok_or("a resource block needs \"resource\"")?;
            let rs = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            let uri = rs("uri").ok_or("resource needs uri")?;
            let mut contents = match (rs("text"), rs("blob")) {
                (Some(t), _) => ResourceContents::text(uri, "", t),
                (None, Some(bl)) => ResourceContents::blob(uri, "", bl),
                _ => return Err("resource needs text or blob".into()),
            };
            contents.mime_type = rs("mimeType");
            contents.meta = r.get("_meta").and_then(Value::as_object).cloned();
            Content::Resource { resource: contents, annotations, meta }
        }
        _ => return Err(format!("unknown content block {b}")),
    })
}
