//! What a request names that one replica of a cluster holds: the protocol knowledge a layer
//! that forwards requests between replicas needs, read from the request head alone.
//!
//! A legacy (pre-2026) Streamable HTTP session lives on the replica that opened it, and a task
//! of the Tasks extension on the replica that runs it; a request naming either has to reach
//! that replica. Which headers and methods name them is MCP's business, so it is here rather
//! than in the layer that forwards.

use super::{RequestHead, METHOD_HEADER, NAME_HEADER, SESSION_ID_HEADER};
use crate::HeldKind;

/// The methods whose `Mcp-Name` is a task id (2026-07-28 Tasks extension): the ones that act on
/// a task that exists, so on the replica that holds it. `tasks/list` names none.
const TASK_METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

/// A session or task a request names, borrowed from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named<'a> {
    /// The legacy session of its `Mcp-Session-Id`.
    Session(&'a str),
    /// The task its `Mcp-Name` names, for a task method (`tasks/get`, `tasks/update`,
    /// `tasks/cancel`).
    Task(&'a str),
}

impl<'a> Named<'a> {
    /// Which kind of held thing it is.
    pub fn kind(self) -> HeldKind {
        match self {
            Named::Session(_) => HeldKind::Session,
            Named::Task(_) => HeldKind::Task,
        }
    }

    /// Its id: the session id or the task id, as the request carries it.
    pub fn id(self) -> &'a str {
        match self {
            Named::Session(id) | Named::Task(id) => id,
        }
    }
}

/// The session or task `head` names, if any: its `Mcp-Session-Id` first (a legacy session names
/// every request it carries), else, for a task method in `Mcp-Method`, the task id in
/// `Mcp-Name`. Only the first value of each header counts, and only a value of visible ASCII
/// (and tabs), as HTTP libraries read header text; anything else names nothing.
///
/// Pure: it looks at the head only, never at the body, so a forwarding layer can decide before
/// it reads the body (the 2026-07-28 headers mirror the body, and the engine checks they agree).
///
/// ```
/// use mcp_proto::http::{named, Named, RequestHead};
///
/// let headers: &[(&str, &[u8])] = &[("Mcp-Method", b"tasks/get"), ("Mcp-Name", b"t1")];
/// let head = RequestHead { method: "POST", path: "/mcp", headers };
/// assert_eq!(named(&head), Some(Named::Task("t1")));
/// ```
pub fn named<'a>(head: &RequestHead<'a>) -> Option<Named<'a>> {
    let text = |name: &str| head.header(name).and_then(header_text);
    if let Some(sid) = text(SESSION_ID_HEADER) {
        return Some(Named::Session(sid));
    }
    let method = text(METHOD_HEADER)?;
    if TASK_METHODS.contains(&method) {
        return text(NAME_HEADER).map(Named::Task);
    }
    None
}

/// `value` as text when every byte is visible ASCII or a tab (what `http`'s
/// `HeaderValue::to_str` accepts), else `None`.
fn header_text(value: &[u8]) -> Option<&str> {
    if value.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named_in<'a>(headers: &'a [(&'a str, &'a [u8])]) -> Option<Named<'a>> {
        named(&RequestHead { method: "POST", path: "/mcp", headers })
    }

    #[test]
    fn a_request_names_nothing_without_the_headers() {
        assert_eq!(named_in(&[]), None);
        assert_eq!(named_in(&[("content-type", b"application/json")]), None);
    }

    #[test]
    fn a_task_method_names_its_task_by_mcp_name() {
        for method in TASK_METHODS {
            let headers: [(&str, &[u8]); 2] = [("mcp-method", method.as_bytes()), ("mcp-name", b"t1")];
            assert_eq!(named_in(&headers), Some(Named::Task("t1")), "{method}");
        }
        assert_eq!(named_in(&[("mcp-method", b"tasks/cancel")]), None, "no Mcp-Name");
        assert_eq!(
            named_in(&[("mcp-method", b"tools/call"), ("mcp-name", b"t1")]),
            None,
            "not a task method"
        );
        assert_eq!(named_in(&[("mcp-method", b"tasks/list"), ("mcp-name", b"t1")]), None, "names no task");
        assert_eq!(named_in(&[("mcp-name", b"t1")]), None, "no Mcp-Method");
    }

    #[test]
    fn a_session_id_comes_first() {
        let headers: [(&str, &[u8]); 3] =
            [("mcp-method", b"tasks/get"), ("mcp-name", b"t1"), ("Mcp-Session-Id", b"s1")];
        let found = named_in(&headers);
        assert_eq!(found, Some(Named::Session("s1")));
        assert_eq!(found.map(Named::kind), Some(HeldKind::Session));
        assert_eq!(found.map(Named::id), Some("s1"));
        assert_eq!(named_in(&[("mcp-session-id", b"s1")]).map(Named::kind), Some(HeldKind::Session));
    }

    #[test]
    fn header_names_are_case_insensitive_and_the_first_value_counts() {
        let headers: [(&str, &[u8]); 4] =
            [("MCP-METHOD", b"tasks/get"), ("Mcp-Name", b"first"), ("mcp-name", b"second"), ("x", b"y")];
        assert_eq!(named_in(&headers), Some(Named::Task("first")));
        let twice: [(&str, &[u8]); 2] = [("mcp-session-id", b"a"), ("mcp-session-id", b"b")];
        assert_eq!(named_in(&twice), Some(Named::Session("a")));
    }

    #[test]
    fn a_value_that_is_not_visible_ascii_names_nothing() {
        assert_eq!(named_in(&[("mcp-session-id", b"s\x001")]), None);
        assert_eq!(named_in(&[("mcp-session-id", "sé".as_bytes())]), None);
        assert_eq!(named_in(&[("mcp-method", b"tasks/get"), ("mcp-name", b"t\x7f")]), None);
        // A session id that is not text does not hide a task the request names.
        let headers: [(&str, &[u8]); 3] =
            [("mcp-session-id", b"\xff"), ("mcp-method", b"tasks/get"), ("mcp-name", b"t1")];
        assert_eq!(named_in(&headers), Some(Named::Task("t1")));
        assert_eq!(named_in(&[("mcp-session-id", b"s\t1")]), Some(Named::Session("s\t1")));
    }
}
