//! Why a registration was refused: [`RegistryError`], and the [`AppError`] it carries for MCP
//! Apps.
//!
//! A leaf: the registry and every kind of item it holds (items, skills, extensions, apps)
//! report these, so they live below all of them and import nothing from them.

use std::fmt;

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The name breaks the 2025-11-25 rules: 1 to 128 characters from `A-Z a-z 0-9 _ - .`.
    InvalidName(String),
    /// An item with that name is already registered.
    Duplicate(String),
    /// A schema is not usable: not an object schema, or it does not compile (an unknown
    /// `$schema`, a remote `$ref`, an invalid keyword). The text says which.
    InvalidSchema(String),
    /// A URI template this engine cannot match unambiguously (see
    /// [`ResourceTemplate::new`](crate::items::ResourceTemplate::new)).
    InvalidTemplate(String),
    /// An empty URI or name, or a URI over [`Limits::max_uri_bytes`](crate::limits::Limits::max_uri_bytes).
    InvalidUri(String),
    /// An extension id that is not a prefixed `_meta`-style key, or settings that are not a
    /// JSON object (see [`Extension`](crate::extensions::Extension)). The text says which.
    InvalidExtension(String),
    /// An MCP App, a tool's link to one, or the apps shell, refused for the reason given.
    InvalidApp(AppError),
    /// A [`Skill`](crate::skills::Skill) that cannot be served: a malformed root or file path, a name
    /// that breaks the Agent Skills rules, a frontmatter `name` other than the root's last
    /// segment, a missing description, a skill nested in another. The text says which.
    InvalidSkill(String),
    /// A skill with more files than [`MAX_SKILL_RESOURCES`](crate::skills::MAX_SKILL_RESOURCES)
    /// (512, `SKILL.md` included), the extension's per-skill limit.
    SkillTooManyFiles {
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// How many files it has, `SKILL.md` included.
        files: usize,
        /// The limit.
        limit: usize,
    },
    /// A skill whose files hold more than [`MAX_SKILL_BYTES`](crate::skills::MAX_SKILL_BYTES)
    /// (16 MiB) together, the extension's per-skill limit.
    SkillTooLarge {
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// Its files' total size in bytes, `SKILL.md` included.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}

impl From<AppError> for RegistryError {
    fn from(e: AppError) -> Self {
        RegistryError::InvalidApp(e)
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::InvalidName(n) => {
                write!(f, "invalid tool name {n:?}: use 1 to 128 characters from A-Z a-z 0-9 _ - .")
            }
            RegistryError::Duplicate(n) => write!(f, "{n:?} is already registered"),
            RegistryError::InvalidSchema(e) => write!(f, "invalid schema: {e}"),
            RegistryError::InvalidTemplate(e) => write!(f, "invalid URI template {e}"),
            RegistryError::InvalidUri(e) => write!(f, "invalid resource: {e}"),
            RegistryError::InvalidExtension(e) => write!(f, "invalid extension: {e}"),
            RegistryError::InvalidApp(e) => write!(f, "invalid app: {e}"),
            RegistryError::InvalidSkill(e) => write!(f, "invalid skill {e}"),
            RegistryError::SkillTooManyFiles { uri, files, limit } => {
                write!(f, "skill {uri:?} has {files} files, over the limit of {limit} (SKILL.md included)")
            }
            RegistryError::SkillTooLarge { uri, bytes, limit } => {
                write!(f, "skill {uri:?} holds {bytes} bytes, over the limit of {limit}")
            }
        }
    }
}

impl std::error::Error for RegistryError {}

/// Why an app, a link to one or the apps shell was refused; [`RegistryError::InvalidApp`]
/// carries it.
///
/// [`RegistryError::InvalidApp`]: crate::registry_error::RegistryError::InvalidApp
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AppError {
    /// The URI is not a `ui://` URI with an authority and without credentials, query or
    /// fragment, or holds characters a URI cannot.
    Uri {
        /// The URI as given.
        uri: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The HTML document is empty.
    EmptyHtml,
    /// The HTML document is over [`MAX_APP_HTML_BYTES`](crate::apps::MAX_APP_HTML_BYTES).
    HtmlTooLarge {
        /// Its size in bytes.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// A CSP entry is not an origin the field allows (see [`AppCsp`](crate::apps::AppCsp)).
    Csp {
        /// The wire name of the list: `connectDomains`, `resourceDomains`, `frameDomains` or
        /// `baseUriDomains`.
        field: &'static str,
        /// The entry as given.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The `domain` is empty or holds whitespace or control characters.
    Domain {
        /// The domain as given.
        domain: String,
    },
    /// A view identifier is empty or declared twice.
    View {
        /// The view as given.
        view: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The configuration without the HTML encodes to more than
    /// [`MAX_APP_CONFIG_BYTES`](crate::apps::MAX_APP_CONFIG_BYTES).
    ConfigTooLarge {
        /// Its encoded size.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// The encoded `resources/read` result (the HTML JSON-escaped, the metadata, the largest
    /// id a request may carry) would exceed
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes).
    ReadTooLarge {
        /// Its encoded size.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// A tool links to a URI no registered app (or the apps shell) has.
    NotAnApp {
        /// The tool.
        tool: String,
        /// The URI it links to.
        uri: String,
    },
    /// The apps shell's URI is exclusive: a resource has it, or a template matches it.
    ShellConflict {
        /// The shell's URI.
        uri: String,
        /// The item that has or matches it (`resource ...`, `template ...`).
        item: String,
    },
    /// A server has one apps shell, and it is already mounted.
    ShellTaken {
        /// The mounted shell's URI.
        uri: String,
    },
    /// The apps shell is linked from compact publication's `call_tool`; a direct server links
    /// its tools one by one ([`Tool::ui`](crate::tool::Tool::ui)).
    ShellNeedsCompact,
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Uri { uri, reason } => write!(f, "app URI {uri:?}: {reason}"),
            AppError::EmptyHtml => write!(f, "app html: the document must not be empty"),
            AppError::HtmlTooLarge { bytes, max } => {
                write!(f, "app html: {bytes} bytes exceeds the {max}-byte limit")
            }
            AppError::Csp { field, entry, reason } => write!(f, "app csp.{field} entry {entry:?}: {reason}"),
            AppError::Domain { domain } => {
                write!(f, "app domain {domain:?}: must be non-empty, without whitespace or control characters")
            }
            AppError::View { view, reason } => write!(f, "app view {view:?}: {reason}"),
            AppError::ConfigTooLarge { bytes, max } => write!(
                f,
                "app configuration (everything but the html): {bytes} bytes encoded exceeds the {max}-byte limit"
            ),
            AppError::ReadTooLarge { bytes, max } => write!(
                f,
                "app html: the encoded resources/read result of {bytes} bytes exceeds the {max}-byte response limit"
            ),
            AppError::NotAnApp { tool, uri } => {
                write!(f, "tool {tool:?} links to {uri:?}, which is no registered app")
            }
            AppError::ShellConflict { uri, item } => {
                write!(f, "the apps shell's URI {uri:?} is exclusive, but {item} has it")
            }
            AppError::ShellTaken { uri } => write!(f, "the apps shell is already mounted at {uri:?}"),
            AppError::ShellNeedsCompact => write!(
                f,
                "the apps shell is linked from compact publication's call_tool: use Mode::Compact, or link \
                 tools to apps one by one (Tool::ui) in direct mode"
            ),
        }
    }
}

impl std::error::Error for AppError {}
