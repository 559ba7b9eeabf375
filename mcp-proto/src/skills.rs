//! Skills (`io.modelcontextprotocol/skills`, SEP-2640): directories of files, minimally a
//! `SKILL.md`, that a server publishes as resources and enumerates with `skills/list`.
//!
//! A [`Skill`] is registered whole ([`RegistryMut::add_skill`](crate::engine::RegistryMut::add_skill)):
//! its root URI (`skill://pdf-processing`, `skill://acme/billing/refunds`), the fields of its
//! frontmatter, the Markdown body of its `SKILL.md`, and its supporting files with their bytes.
//! The engine then serves everything the extension asks for without a handler:
//!
//! - each file as a resource (`resources/list`, `resources/read`), the `SKILL.md` as
//!   `text/markdown` named and described by its frontmatter;
//! - `skills/list` (paged, entries never split) and `skills/get`, each entry with the
//!   frontmatter and every file's `sha256:` digest and size, computed once at registration;
//! - `resources/directory/read` on the skill's root and every directory below it
//!   (subdirectories as `inode/directory` children);
//! - the declaration `capabilities.extensions["io.modelcontextprotocol/skills"] =
//!   {"directoryRead": true}`, to the callers that can see at least one skill.
//!
//! # Why the frontmatter is given as data
//!
//! The extension requires an entry's `frontmatter` to be identical to the YAML frontmatter of
//! the `SKILL.md` it describes, and hosts check it field by field with their own YAML parser.
//! Parsing an author's YAML here would make that identity depend on two parsers agreeing
//! (YAML 1.1 and 1.2 read `yes`, `on` or `0777` differently). Instead the registrant gives the
//! frontmatter as JSON values ([`Skill::new`] for `name` and `description`, [`Skill::field`]
//! for the rest) and the engine writes the YAML: every string double-quoted with JSON-style
//! escapes unless it is a plain lowercase word no YAML schema reads as anything else, nested
//! objects as block mappings, arrays in flow style. JSON is YAML 1.2's flow syntax, so the file
//! parses back to exactly the entry's object. No YAML crate is needed for that.
//!
//! # Bounds
//!
//! The extension fixes two per-skill limits that every host must accept and servers should
//! not exceed; registration refuses a skill past either with a specific error:
//! [`MAX_SKILL_RESOURCES`] files (`SKILL.md` included;
//! [`RegistryError::SkillTooManyFiles`]) and [`MAX_SKILL_BYTES`] in total
//! ([`RegistryError::SkillTooLarge`]). Every file's URI is bounded by
//! [`Limits::max_uri_bytes`](crate::limits::Limits::max_uri_bytes) ([`RegistryError::InvalidUri`]).
//! A `skills/list` page holds at most [`Limits::page_size`](crate::limits::Limits::page_size) entries
//! and ends early before an entry that would take it past half of
//! [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes) (a page always holds one
//! entry); a directory read pages its children by `page_size`.
//!
//! # Publication modes
//!
//! Skills are not tools: compact publication (three discovery tools in place of the tool
//! catalogue) leaves them as they are, served by the same methods in both modes.
//!
//! Nested skills (a `SKILL.md` in a descendant directory of another registered skill) are not
//! supported yet, and a skill whose root nests with a registered one's is refused at
//! registration. SEP-2640 allows them: the nested skill gets its own entry, and the enclosing
//! skill's manifest lists the nested skill's files too (the same file in both). Serving that
//! means an enclosing entry that changes with the nested skill's files, one gate for both, and
//! removing them together, none of which the registry does today. What works now is what the
//! SEP says a nested skill is from the enclosing skill's side: its `SKILL.md` and files served
//! as ordinary supporting files of the outer skill.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::caller::Gate;
use crate::items::{CacheHint, Resource};
use crate::registry_error::RegistryError;

/// The extension's identifier, as declared under `capabilities.extensions`.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/skills";

/// The file name of the manifest at every skill's root.
pub const SKILL_MD: &str = "SKILL.md";

/// The media type of a directory resource (`resources/directory/read` children).
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// The most files one skill may have, `SKILL.md` included: 512, the extension's "resources per
/// skill" limit (SEP-2640, Limits). A skill with more is refused at registration with
/// [`RegistryError::SkillTooManyFiles`].
pub const MAX_SKILL_RESOURCES: usize = 512;

/// The most bytes one skill's files may hold together, `SKILL.md` included: 16 MiB
/// (16,777,216 bytes), the extension's "total file size per skill" limit (SEP-2640, Limits).
/// A larger skill is refused at registration with [`RegistryError::SkillTooLarge`].
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;

/// The longest description the Agent Skills specification allows (1 to 1024 characters).
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The longest skill name the Agent Skills specification allows.
const MAX_NAME_CHARS: usize = 64;

/// The longest `compatibility` the Agent Skills specification allows (1 to 500 characters).
const MAX_COMPATIBILITY_CHARS: usize = 500;

/// A supporting file of a skill.
#[derive(Debug, Clone)]
struct SkillFile {
    /// Relative to the skill's root, `/`-separated (`templates/invoice.md`).
    path: String,
    mime_type: String,
    bytes: Arc<[u8]>,
}

/// A skill: its root URI, its frontmatter, the body of its `SKILL.md` and its supporting
/// files. See the [module docs](self) for what the engine serves from it.
#[derive(Debug, Clone)]
pub struct Skill {
    root: String,
    frontmatter: Map<String, Value>,
    body: String,
    files: Vec<SkillFile>,
    pub(crate) gate: Option<Gate>,
    pub(crate) cache: CacheHint,
}

impl Skill {
    /// A skill rooted at `root` (its directory URI, without a trailing slash:
    /// `skill://git-workflow`, `skill://acme/billing/refunds`), whose name is the last segment
    /// of `root` and whose `SKILL.md` has the frontmatter `name` and `description` followed by
    /// `body` (Markdown). The root and name are checked at registration: a scheme, `://`, one
    /// or more non-empty segments of URI path characters, and a last segment that satisfies
    /// the Agent Skills naming rules (1 to 64 characters of `a-z 0-9 -`, no hyphen first,
    /// last or twice in a row); the description must have 1 to 1024 characters.
    pub fn new(root: impl Into<String>, description: impl Into<String>, body: impl Into<String>) -> Self {
        let root = root.into();
        let name = last_segment(&root).to_owned();
        let mut frontmatter = Map::new();
        frontmatter.insert("name".into(), Value::String(name));
        frontmatter.insert("description".into(), Value::String(description.into()));
        Self {
            root,
            frontmatter,
            body: body.into(),
            files: Vec::new(),
            gate: None,
            cache: CacheHint::private(),
        }
    }

    /// Adds (or replaces) a frontmatter field: `license`, `compatibility`, `metadata` (an
    /// object of strings), `allowed-tools`, or any field a later Agent Skills revision defines.
    /// Any JSON value is written into the `SKILL.md` so that it parses back to that value.
    /// Registration fails when a field the Agent Skills specification defines breaks its
    /// constraints: `name` other than the root's last segment, `description` not a string of 1
    /// to 1024 characters, `license` not a string, `compatibility` not a string of 1 to 500
    /// characters, `metadata` not an object of string values, `allowed-tools` not a string.
    /// Other fields are not checked.
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.frontmatter.insert(key.into(), value);
        self
    }

    /// Adds a supporting file at `path` below the root (`scripts/extract.py`,
    /// `templates/regional/eu-invoice.md`), with its media type and content. Read as text when
    /// the type is textual and the bytes are UTF-8, else as a base64 blob. Checked at
    /// registration: non-empty segments of URI path characters, no `.` or `..`, not the root
    /// `SKILL.md`, each path once, and no path both a file and a directory.
    pub fn file(
        mut self,
        path: impl Into<String>,
        mime_type: impl Into<String>,
        bytes: impl Into<Vec<u8>>,
    ) -> Self {
        let bytes: Vec<u8> = bytes.into();
        self.files.push(SkillFile { path: path.into(), mime_type: mime_type.into(), bytes: bytes.into() });
        self
    }

    /// Hides the skill, its files and its directories from callers the gate refuses, and
    /// refuses their access with the errors an unknown skill or resource gets.
    pub fn gate(mut self, gate: Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The gate set with [`gate`](Self::gate), if any.
    pub fn declared_gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    /// How 2026-07-28 clients may cache `skills/get` and reads of this skill's files. Default
    /// [`CacheHint::private`] (private, TTL 0). The engine narrows it as for resources (see
    /// [`CacheHint`]).
    pub fn cache(mut self, hint: CacheHint) -> Self {
        self.cache = hint;
        self
    }

    /// The skill's root directory URI, as given.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The URI of its `SKILL.md`: the root, `/`, `SKILL.md`.
    pub fn uri(&self) -> String {
        format!("{}/{SKILL_MD}", self.root)
    }

    /// The name: the frontmatter's `name` (the root's last segment unless replaced).
    pub fn name(&self) -> &str {
        self.frontmatter.get("name").and_then(Value::as_str).unwrap_or_default()
    }

    /// The description from the frontmatter.
    pub fn description(&self) -> &str {
        self.frontmatter.get("description").and_then(Value::as_str).unwrap_or_default()
    }

    /// The frontmatter, as `skills/list` and `skills/get` send it.
    pub fn frontmatter(&self) -> &Map<String, Value> {
        &self.frontmatter
    }

    /// The `SKILL.md` text served: `---`, the frontmatter as YAML, `---`, the body.
    pub fn markdown(&self) -> String {
        let mut out = String::from("---\n");
        for (k, v) in &self.frontmatter {
            yaml_entry(&mut out, k, v, 0);
        }
        out.push_str("---\n");
        out.push_str(&self.body);
        out
    }
}

/// The last `/`-separated segment of a root URI (empty when there is none).
fn last_segment(root: &str) -> &str {
    let path = root.split_once("://").map_or("", |(_, p)| p);
    path.rsplit('/').next().unwrap_or_default()
}

/// Whether `name` satisfies the Agent Skills naming rules: 1 to 64 characters of lowercase
/// ASCII letters, digits and hyphens, with no hyphen first, last, or next to another.
pub fn valid_skill_name(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=MAX_NAME_CHARS).contains(&b.len())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first() != Some(&b'-')
        && b.last() != Some(&b'-')
        && !name.contains("--")
}

/// Whether `seg` is a non-empty URI path segment: unreserved and sub-delimiter characters,
/// `:` and `@` where `colon_at` (never in the authority, where they would mean a port or user),
/// and percent-escapes. `.` and `..` are refused, since clients resolve them away.
fn valid_segment(seg: &str, colon_at: bool) -> bool {
    let b = seg.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let ok = c.is_ascii_alphanumeric()
            || b"-._~!$&'()*+,;=".contains(&c)
            || (colon_at && (c == b':' || c == b'@'));
        if c == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
            continue;
        }
        if !ok {
            return false;
        }
        i += 1;
    }
    !seg.is_empty() && seg != "." && seg != ".."
}

/// The optional frontmatter fields the Agent Skills specification defines, checked against its
/// constraints when present: SEP-2640 requires a served skill to conform to that
/// specification, and hosts that validate a skill would refuse one that does not. Fields it
/// does not define pass through unchecked, as the SEP requires of fields a later revision adds.
fn check_optional_fields(root: &str, fm: &Map<String, Value>) -> Result<(), RegistryError> {
    if let Some(v) = fm.get("license") {
        if !v.is_string() {
            return Err(invalid(root, "the frontmatter license must be a string (a license name or file)"));
        }
    }
    if let Some(v) = fm.get("compatibility") {
        let ok = v.as_str().is_some_and(|c| (1..=MAX_COMPATIBILITY_CHARS).contains(&c.chars().count()));
        if !ok {
            return Err(invalid(
                root,
                "the frontmatter compatibility must be a string of 1 to 500 characters",
            ));
        }
    }
    if let Some(v) = fm.get("metadata") {
        let ok = v.as_object().is_some_and(|m| m.values().all(Value::is_string));
        if !ok {
            return Err(invalid(
                root,
                "the frontmatter metadata must map string keys to string values (write \"2.1.0\", not 2.1)",
            ));
        }
    }
    if let Some(v) = fm.get("allowed-tools") {
        if !v.is_string() {
            return Err(invalid(
                root,
                "the frontmatter allowed-tools must be one space-separated string (`Bash(git:*) Read`)",
            ));
        }
    }
    Ok(())
}

fn invalid(skill: &str, why: impl std::fmt::Display) -> RegistryError {
    RegistryError::InvalidSkill(format!("{skill:?}: {why}"))
}

/// A file of a registered skill, as served.
#[derive(Debug)]
pub(crate) struct ServedFile {
    pub(crate) uri: String,
    pub(crate) mime_type: String,
    pub(crate) bytes: Arc<[u8]>,
}

impl ServedFile {
    /// The file as `resources/read` contents: text when the type is textual and the bytes are
    /// UTF-8, else base64.
    pub(crate) fn contents(&self) -> crate::content::ResourceContents {
        match std::str::from_utf8(&self.bytes) {
            Ok(text) if textual(&self.mime_type) => {
                crate::content::ResourceContents::text(self.uri.clone(), self.mime_type.clone(), text)
            }
            _ => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(&self.bytes);
                crate::content::ResourceContents::blob(self.uri.clone(), self.mime_type.clone(), b64)
            }
        }
    }
}

/// Whether a media type names text (sent as `text`, not `blob`, when the bytes are UTF-8).
fn textual(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || essence.ends_with("+yaml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/javascript"
                | "application/x-sh"
                | "application/x-python"
        )
}

/// A skill as the registry keeps it: the declaration, its served files, the entry text and
/// the directory index.
#[derive(Debug)]
pub(crate) struct SkillEntry {
    pub(crate) skill: Skill,
    /// `SKILL.md` first, then the supporting files in path order.
    pub(crate) files: Vec<(Resource, Arc<ServedFile>)>,
    /// The `Skill` entry of `skills/list` and `skills/get`, serialised once.
    pub(crate) entry: Arc<str>,
    /// Every directory of the skill (its root included), by URI: its direct children, by URI,
    /// each as its `resources/directory/read` listing.
    pub(crate) dirs: BTreeMap<String, BTreeMap<String, Arc<str>>>,
}

impl SkillEntry {
    /// Checks `skill` and prepares what serving it needs; `max_uri` bounds every file's URI.
    pub(crate) fn new(skill: Skill, max_uri: usize) -> Result<Self, RegistryError> {
        let root = skill.root.clone();
        let (scheme, path) = root
            .split_once("://")
            .ok_or_else(|| invalid(&root, "the root must be a URI with `://` (`skill://name`)"))?;
        let scheme_ok = scheme.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && scheme.bytes().all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c));
        if !scheme_ok {
            return Err(invalid(&root, "the root's scheme is not a URI scheme"));
        }
        let segments: Vec<&str> = path.split('/').collect();
        for (i, seg) in segments.iter().enumerate() {
            if !valid_segment(seg, i > 0) {
                return Err(invalid(
                    &root,
                    format!(
                        "segment {seg:?} of the root is empty or not a URI path segment (write the root \
                         without a trailing slash)"
                    ),
                ));
            }
        }
        let name = last_segment(&root);
        if !valid_skill_name(name) {
            return Err(invalid(
                &root,
                format!(
                    "the skill name {name:?} (the root's last segment) breaks the Agent Skills naming \
                     rules: 1 to 64 characters of a-z 0-9 and -, no hyphen first, last or twice in a row"
                ),
            ));
        }
        match skill.frontmatter.get("name") {
            Some(Value::String(n)) if n == name => {}
            other => {
                return Err(invalid(
                    &root,
                    format!("frontmatter name {other:?} must equal the root's last segment {name:?}"),
                ))
            }
        }
        match skill.frontmatter.get("description") {
            Some(Value::String(d)) if (1..=MAX_DESCRIPTION_CHARS).contains(&d.chars().count()) => {}
            _ => {
                return Err(invalid(
                    &root,
                    "the frontmatter description must be a string of 1 to 1024 characters",
                ))
            }
        }
        check_optional_fields(&root, &skill.frontmatter)?;
        let count = skill.files.len().saturating_add(1);
        if count > MAX_SKILL_RESOURCES {
            return Err(RegistryError::SkillTooManyFiles {
                uri: skill.uri(),
                files: count,
                limit: MAX_SKILL_RESOURCES,
            });
        }
        let markdown = skill.markdown();
        let total =
            skill.files.iter().fold(markdown.len() as u64, |sum, f| sum.saturating_add(f.bytes.len() as u64));
        if total > MAX_SKILL_BYTES {
            return Err(RegistryError::SkillTooLarge {
                uri: skill.uri(),
                bytes: total,
                limit: MAX_SKILL_BYTES,
            });
        }
        // Paths: valid, unique, and never both a file and a directory.
        let mut paths: BTreeMap<&str, &SkillFile> = BTreeMap::new();
        for f in &skill.files {
            let segs: Vec<&str> = f.path.split('/').collect();
            if !segs.iter().all(|s| valid_segment(s, true)) {
                return Err(invalid(
                    &root,
                    format!("file path {:?} has an empty, `.`, `..` or non-URI segment", f.path),
                ));
            }
            if f.path == SKILL_MD {
                return Err(invalid(
                    &root,
                    "the root SKILL.md is written from the frontmatter and body, not added as a file",
                ));
            }
            if paths.insert(&f.path, f).is_some() {
                return Err(invalid(&root, format!("file path {:?} is given twice", f.path)));
            }
        }
        for p in paths.keys() {
            let mut dir = *p;
            while let Some((parent, _)) = dir.rsplit_once('/') {
                if paths.contains_key(parent) {
                    return Err(invalid(
                        &root,
                        format!("{parent:?} is both a file and the directory of {p:?}"),
                    ));
                }
                dir = parent;
            }
        }
        let skill_md = Arc::new(ServedFile {
            uri: skill.uri(),
            mime_type: "text/markdown".into(),
            bytes: markdown.into_bytes().into(),
        });
        let mut files = Vec::with_capacity(count);
        let mut md_resource = Resource::new(skill_md.uri.clone(), skill.name())
            .description(skill.description())
            .mime_type("text/markdown")
            .size(skill_md.bytes.len() as u64)
            .cache(skill.cache);
        md_resource.info.gate = skill.gate.clone();
        files.push((md_resource, skill_md));
        for (path, f) in &paths {
            let uri = format!("{root}/{path}");
            let file_name = path.rsplit('/').next().unwrap_or(path);
            let mut r = Resource::new(uri.clone(), file_name)
                .mime_type(f.mime_type.clone())
                .size(f.bytes.len() as u64)
                .cache(skill.cache);
            r.info.gate = skill.gate.clone();
            files.push((
                r,
                Arc::new(ServedFile { uri, mime_type: f.mime_type.clone(), bytes: f.bytes.clone() }),
            ));
        }
        if let Some((r, _)) = files.iter().find(|(r, _)| r.uri.len() > max_uri) {
            return Err(RegistryError::InvalidUri(format!(
                "{:?}: longer than the {max_uri}-byte URI limit",
                r.uri
            )));
        }
        let entry = entry_json(&skill, &files);
        let dirs = directories(&root, &files);
        Ok(Self { skill, files, entry: entry.into(), dirs })
    }

    /// The URI of the `SKILL.md`: the key of the skills catalogue.
    pub(crate) fn uri(&self) -> &str {
        self.files.first().map_or("", |(r, _)| r.uri.as_str())
    }
}

/// The `Skill` entry: `uri`, `frontmatter`, and every file's `uri`, `digest` and `size`.
fn entry_json(skill: &Skill, files: &[(Resource, Arc<ServedFile>)]) -> String {
    let resources: Vec<Value> = files
        .iter()
        .map(|(_, f)| {
            let digest = Sha256::digest(&f.bytes);
            let mut hex = String::with_capacity(7 + 64);
            hex.push_str("sha256:");
            for b in digest {
                let _ = write!(hex, "{b:02x}");
            }
            serde_json::json!({ "uri": f.uri, "digest": hex, "size": f.bytes.len() })
        })
        .collect();
    let mut m = Map::new();
    m.insert("uri".into(), Value::String(skill.uri()));
    m.insert("frontmatter".into(), Value::Object(skill.frontmatter.clone()));
    m.insert("resources".into(), Value::Array(resources));
    Value::Object(m).to_string()
}

/// Every directory of a skill with its direct children's listings: files with their resource
/// metadata, subdirectories as `inode/directory`.
fn directories(
    root: &str,
    files: &[(Resource, Arc<ServedFile>)],
) -> BTreeMap<String, BTreeMap<String, Arc<str>>> {
    let mut dirs: BTreeMap<String, BTreeMap<String, Arc<str>>> = BTreeMap::new();
    dirs.insert(root.to_owned(), BTreeMap::new());
    for (r, f) in files {
        let Some(rel) = f.uri.strip_prefix(root).and_then(|p| p.strip_prefix('/')) else { continue };
        let mut listing = serde_json::json!({ "uri": f.uri, "name": r.name });
        if let (Some(d), Value::Object(m)) = (&r.info.description, &mut listing) {
            m.insert("description".into(), Value::String(d.clone()));
        }
        if let Value::Object(m) = &mut listing {
            m.insert("mimeType".into(), Value::String(f.mime_type.clone()));
            m.insert("size".into(), f.bytes.len().into());
        }
        let (parent_rel, _) = rel.rsplit_once('/').unwrap_or(("", rel));
        let parent = if parent_rel.is_empty() { root.to_owned() } else { format!("{root}/{parent_rel}") };
        dirs.entry(parent).or_default().insert(f.uri.clone(), listing.to_string().into());
        // Each directory between the root and the file is a child of its own parent.
        let mut dir_rel = parent_rel;
        while !dir_rel.is_empty() {
            let (up, name) = dir_rel.rsplit_once('/').unwrap_or(("", dir_rel));
            let dir_uri = format!("{root}/{dir_rel}");
            let up_uri = if up.is_empty() { root.to_owned() } else { format!("{root}/{up}") };
            let listing =
                serde_json::json!({ "uri": dir_uri, "name": name, "mimeType": DIRECTORY_MIME_TYPE });
            dirs.entry(dir_uri.clone()).or_default();
            dirs.entry(up_uri).or_default().insert(dir_uri, listing.to_string().into());
            dir_rel = up;
        }
    }
    dirs
}

/// Words no YAML schema (1.1 or 1.2) reads as a string when written plain.
const YAML_WORDS: [&str; 11] = ["true", "false", "null", "yes", "no", "on", "off", "y", "n", "nan", "inf"];

/// Whether `s` can be written as a plain YAML scalar and be read back as this string by any
/// YAML parser: a lowercase letter, then lowercase letters, digits, `-` and `_`, and not a word
/// some schema reads as a boolean or null.
fn plain(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_lowercase)
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
        && !YAML_WORDS.contains(&s)
}

/// A key plain when [`plain`] allows it (upper-case letters too: keys are never typed by
/// schemas beyond booleans and null, which the word list covers), else double-quoted.
fn yaml_key(out: &mut String, k: &str) {
    let b = k.as_bytes();
    let plain_key = b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        && !YAML_WORDS.contains(&k.to_ascii_lowercase().as_str());
    if plain_key {
        out.push_str(k);
    } else {
        yaml_quoted(out, k);
    }
}

/// A double-quoted YAML scalar: JSON's escapes, plus `\u` escapes for every character YAML
/// does not allow unescaped (controls, DEL, C1 controls, the line and paragraph separators and
/// the byte-order mark).
fn yaml_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A value in flow style (inside an array): strings always quoted, objects and arrays in
/// braces and brackets.
fn yaml_flow(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => yaml_quoted(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                yaml_flow(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                yaml_quoted(out, k);
                out.push_str(": ");
                yaml_flow(out, item);
            }
            out.push('}');
        }
        // Null, booleans and numbers are written as JSON writes them, which YAML reads alike.
        other => out.push_str(&other.to_string()),
    }
}

/// One `key: value` line of a block mapping at `indent` spaces; a non-empty object value
/// becomes a nested block mapping.
fn yaml_entry(out: &mut String, k: &str, v: &Value, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
    yaml_key(out, k);
    out.push(':');
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            for (k2, v2) in m {
                yaml_entry(out, k2, v2, indent + 2);
            }
        }
        Value::String(s) if plain(s) => {
            out.push(' ');
            out.push_str(s);
            out.push('\n');
        }
        other => {
            out.push(' ');
            yaml_flow(out, other);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for ok in ["a", "pdf-processing", "x1", "a-b-c", &"a".repeat(64), "123"] {
            assert!(valid_skill_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "Pdf", "a_b", "a.b", "ü", &"a".repeat(65), "a b"] {
            assert!(!valid_skill_name(bad), "{bad}");
        }
    }

    fn check(skill: Skill) -> Result<SkillEntry, RegistryError> {
        SkillEntry::new(skill, 2048)
    }

    #[test]
    fn roots_and_names_are_checked() {
        assert!(check(Skill::new("skill://git-workflow", "d", "b")).is_ok());
        assert!(check(Skill::new("skill://acme/billing/refunds", "d", "b")).is_ok());
        for bad in [
            "git-workflow",
            "skill://",
            "skill://acme/",
            "skill://acme//refunds",
            "skill://Refunds",
            "skill://a--b",
            "skill://acme/../refunds",
            "skill://ac me/refunds",
            "skill://acme:80/refunds",
            "1x://refunds",
            "skill://acme/bad%zz/refunds",
        ] {
            let e = check(Skill::new(bad, "d", "b")).unwrap_err();
            assert!(matches!(e, RegistryError::InvalidSkill(_)), "{bad}: {e}");
        }
        // The frontmatter name must stay the last segment; the description must be 1..=1024.
        let e = check(Skill::new("skill://a", "d", "b").field("name", json!("b"))).unwrap_err();
        assert!(e.to_string().contains("must equal"), "{e}");
        assert!(check(Skill::new("skill://a", "", "b")).is_err());
        assert!(check(Skill::new("skill://a", "é".repeat(1024), "b")).is_ok());
        assert!(check(Skill::new("skill://a", "é".repeat(1025), "b")).is_err());
        assert!(check(Skill::new("skill://a", "d", "b").field("description", json!(1))).is_err());
    }

    #[test]
    fn the_agent_skills_optional_fields_are_checked() {
        let with = |k: &str, v: Value| check(Skill::new("skill://s", "d", "b").field(k, v));
        for (k, v) in [
            ("license", json!("Apache-2.0")),
            ("compatibility", json!("Requires git")),
            ("compatibility", json!("é".repeat(500))),
            ("metadata", json!({"version": "2.1.0", "author": "acme"})),
            ("metadata", json!({})),
            ("allowed-tools", json!("Bash(git:*) Read")),
            // Fields the specification does not define pass through as they are.
            ("x-extra", json!({"n": 7, "list": [1, true]})),
        ] {
            assert!(with(k, v.clone()).is_ok(), "{k}: {v}");
        }
        for (k, v) in [
            ("license", json!(1)),
            ("compatibility", json!("")),
            ("compatibility", json!("é".repeat(501))),
            ("compatibility", json!(["git"])),
            ("metadata", json!({"version": 2.1})),
            ("metadata", json!({"nested": {"k": "v"}})),
            ("metadata", json!("version=1")),
            ("allowed-tools", json!(["Bash", "Read"])),
        ] {
            let e = with(k, v.clone()).unwrap_err();
            assert!(matches!(&e, RegistryError::InvalidSkill(m) if m.contains(k)), "{k}: {v}: {e}");
        }
    }

    #[test]
    fn file_paths_are_checked() {
        let base = || Skill::new("skill://s", "d", "b");
        assert!(
            check(base().file("a/b.md", "text/markdown", "x").file("a/c/d.md", "text/markdown", "y")).is_ok()
        );
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "a b", "SKILL.md"] {
            let e = check(base().file(bad, "text/plain", "x")).unwrap_err();
            assert!(matches!(e, RegistryError::InvalidSkill(_)), "{bad:?}: {e}");
        }
        let twice = base().file("a.md", "text/plain", "x").file("a.md", "text/plain", "y");
        assert!(check(twice).unwrap_err().to_string().contains("twice"));
        let both = base().file("a", "text/plain", "x").file("a/b", "text/plain", "y");
        assert!(check(both).unwrap_err().to_string().contains("both a file and the directory"));
        // A nested SKILL.md is an ordinary supporting file.
        assert!(check(base().file("sub/SKILL.md", "text/markdown", "x")).is_ok());
    }

    #[test]
    fn the_bounds_are_the_extensions() {
        let mut s = Skill::new("skill://s", "d", "b");
        for i in 0..MAX_SKILL_RESOURCES - 1 {
            s = s.file(format!("f{i}"), "text/plain", "");
        }
        assert!(check(s.clone()).is_ok(), "511 files and SKILL.md make 512");
        let e = check(s.file("one-more", "text/plain", "")).unwrap_err();
        assert_eq!(
            e,
            RegistryError::SkillTooManyFiles { uri: "skill://s/SKILL.md".into(), files: 513, limit: 512 }
        );

        let md_len = Skill::new("skill://s", "d", "b").markdown().len();
        let fits = vec![0u8; MAX_SKILL_BYTES as usize - md_len];
        assert!(check(Skill::new("skill://s", "d", "b").file("big.bin", "application/octet-stream", fits))
            .is_ok());
        let over = vec![0u8; MAX_SKILL_BYTES as usize - md_len + 1];
        let e = check(Skill::new("skill://s", "d", "b").file("big.bin", "application/octet-stream", over))
            .unwrap_err();
        assert!(
            matches!(e, RegistryError::SkillTooLarge { bytes, limit, .. } if bytes == MAX_SKILL_BYTES + 1 && limit == MAX_SKILL_BYTES)
        );
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn the_entry_has_every_file_with_its_digest_and_size() {
        let e = check(
            Skill::new("skill://acme/refunds", "Process refunds", "# Refunds\n")
                .field("license", json!("Apache-2.0"))
                .file("examples/email.md", "text/markdown", "hello"),
        )
        .unwrap();
        let entry: Value = serde_json::from_str(&e.entry).unwrap();
        let md =
            "---\nname: refunds\ndescription: \"Process refunds\"\nlicense: \"Apache-2.0\"\n---\n# Refunds\n";
        assert_eq!(e.skill.markdown(), md);
        let hex = |b: &[u8]| Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            entry,
            json!({
                "uri": "skill://acme/refunds/SKILL.md",
                "frontmatter": {"name": "refunds", "description": "Process refunds", "license": "Apache-2.0"},
                "resources": [
                    {"uri": "skill://acme/refunds/SKILL.md", "digest": format!("sha256:{}", hex(md.as_bytes())), "size": md.len()},
                    {"uri": "skill://acme/refunds/examples/email.md", "digest": format!("sha256:{}", hex(b"hello")), "size": 5},
                ]
            })
        );
        // hello's SHA-256, as any other tool computes it.
        assert!(entry
            .to_string()
            .contains("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"));
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn directories_list_direct_children() {
        let e = check(
            Skill::new("skill://p", "d", "b")
                .file("templates/a.md", "text/markdown", "a")
                .file("templates/regional/eu.md", "text/markdown", "eu")
                .file("scripts/x.py", "text/x-python", "x"),
        )
        .unwrap();
        let keys = |d: &str| e.dirs.get(d).map(|c| c.keys().cloned().collect::<Vec<_>>());
        assert_eq!(
            keys("skill://p").unwrap(),
            ["skill://p/SKILL.md", "skill://p/scripts", "skill://p/templates"]
        );
        assert_eq!(
            keys("skill://p/templates").unwrap(),
            ["skill://p/templates/a.md", "skill://p/templates/regional"]
        );
        assert_eq!(keys("skill://p/templates/regional").unwrap(), ["skill://p/templates/regional/eu.md"]);
        assert_eq!(keys("skill://p/templates/a.md"), None, "a file is no directory");
        let regional =
            e.dirs.get("skill://p/templates").unwrap().get("skill://p/templates/regional").unwrap();
        assert_eq!(
            &**regional,
            r#"{"uri":"skill://p/templates/regional","name":"regional","mimeType":"inode/directory"}"#
        );
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn frontmatter_yaml_quotes_whatever_could_be_read_otherwise() {
        let s = Skill::new("skill://s", "Line one\nsays \"hi\": #1 \\ \u{0085}\u{2028}\u{7f}", "")
            .field("allowed-tools", json!("Bash(git:*) Read"))
            .field("compatibility", json!("yes"))
            .field("x-extra", json!({"version": "2.1.0", "io.example/k": "v", "n": 7, "on": true, "e": {}}))
            .field("list", json!(["a", 1, null, {"k": ["v"]}]))
            .field("Plain_Key", json!("null"));
        assert_eq!(
            s.markdown(),
            "---\nname: s\n\
             description: \"Line one\\nsays \\\"hi\\\": #1 \\\\ \\u0085\\u2028\\u007f\"\n\
             allowed-tools: \"Bash(git:*) Read\"\n\
             compatibility: \"yes\"\n\
             x-extra:\n  version: \"2.1.0\"\n  \"io.example/k\": v\n  \"n\": 7\n  \"on\": true\n  e: {}\n\
             list: [\"a\", 1, null, {\"k\": [\"v\"]}]\n\
             Plain_Key: \"null\"\n---\n"
        );
    }
}
