//! Protocol versions and every difference between them, in one type.
//!
//! Code elsewhere asks a [`ProtocolVersion`] a question ("does this peer know `audio` blocks?")
//! rather than comparing version strings, so a new revision is one new variant and a few
//! predicates, not a hunt through the handlers.

use std::fmt;

/// A protocol revision this engine speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2025-03-26: the first Streamable HTTP revision; the only one with JSON-RPC batches.
    V2025_03_26,
    /// 2025-06-18: titles, `structuredContent`, `outputSchema`, `resource_link`, elicitation.
    V2025_06_18,
    /// 2025-11-25: icons, URL elicitation, tool-name rules, tool argument errors as results.
    V2025_11_25,
    /// 2026-07-28: stateless, per-request `_meta`, `resultType`, `server/discover`.
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every supported version, newest first.
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];

    /// The dated form of every supported version, newest first: what `server/discover` lists
    /// as `supportedVersions` and a server card as `supportedProtocolVersions`, so that the two
    /// never disagree.
    pub fn supported() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.as_str()).collect()
    }

    /// The newest version negotiated through `initialize`: what a legacy client asking for an
    /// unknown version is offered.
    pub const NEWEST_LEGACY: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// Parses the dated form; `None` for anything this engine does not speak.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "2025-03-26" => Self::V2025_03_26,
            "2025-06-18" => Self::V2025_06_18,
            "2025-11-25" => Self::V2025_11_25,
            "2026-07-28" => Self::V2026_07_28,
            _ => return None,
        })
    }

    /// The dated form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Stateless era: no handshake, `_meta` on every request, `resultType` on every result.
    pub fn is_modern(self) -> bool {
        self >= Self::V2026_07_28
    }

    /// JSON-RPC batches are allowed (2025-03-26 only).
    pub fn allows_batches(self) -> bool {
        self == Self::V2025_03_26
    }

    /// `title`, `_meta`, `outputSchema` on tools; `structuredContent`; `resource_link` blocks;
    /// `_meta` and `annotations.lastModified` on content.
    pub fn has_structured_output(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// `icons` on tools, resources, prompts and implementations.
    pub fn has_icons(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// `execution` on tools (present in 2025-11-25 only; 2026 removed it).
    pub fn has_tool_execution(self) -> bool {
        self == Self::V2025_11_25
    }

    /// Argument validation failures are reported as a result with `isError: true` (SEP-1303)
    /// rather than as `-32602`.
    pub fn argument_errors_as_results(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// `structuredContent` may be any JSON value (not only an object), and `outputSchema` any
    /// type.
    pub fn structured_content_any_type(self) -> bool {
        self >= Self::V2026_07_28
    }

    /// `description`, `websiteUrl` and `icons` on `Implementation`; `title` since 2025-06-18.
    pub fn implementation_has_title(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// `capabilities.extensions`, the server's and the client's. In the schema from 2026-07-28;
    /// 2025-11-25 has no such field but tolerates it as an extra one, and the MCP Apps extension
    /// negotiates through it on that version, so it is sent there too. Older versions never
    /// see it.
    pub fn has_extensions(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// `description`/`websiteUrl` on `Implementation`.
    pub fn implementation_has_description(self) -> bool {
        self >= Self::V2025_11_25
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_order() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::parse(v.as_str()), Some(v));
        }
        assert!(ProtocolVersion::parse("2024-11-05").is_none());
        assert!(ProtocolVersion::V2026_07_28.is_modern());
        assert!(!ProtocolVersion::NEWEST_LEGACY.is_modern());
        assert!(ProtocolVersion::V2025_03_26.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.allows_batches());
    }
}
