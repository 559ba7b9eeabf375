//! The Skills extension's methods (`skills/list`, `skills/get`, `resources/directory/read`),
//! reads of skill files, and registering skills at run time. What a skill is and how its
//! entry is prepared is in [`crate::skills`].

use std::ops::Bound;

use serde_json::{Map, Value};

use crate::caller::{admits, Caller};
use crate::content::ContentsWire;
use crate::cursor;
use crate::engine::protocol::registry_mut::RegistryMut;
use crate::engine::state::subscriptions::List;
use crate::engine::{Ctx, Engine};
use crate::items::CacheHint;
use crate::jsonrpc::{encode_result, encode_result_text, RpcError};
use crate::registry::{Listed, RegistryError, Source};
use crate::skills::{Skill, SkillEntry};

/// The methods this extension adds, each answered by the engine.
pub(in crate::engine) const METHODS: [&str; 3] = ["skills/list", "skills/get", "resources/directory/read"];

impl<H: Clone> RegistryMut<'_, H> {
    /// Registers a skill (see [`Skill`]): its entry for `skills/list` and `skills/get`, its
    /// files as resources, its directories for `resources/directory/read`, all served by the
    /// engine. Refused whole when the skill is invalid or over a bound
    /// ([`RegistryError::InvalidSkill`], [`SkillTooManyFiles`](RegistryError::SkillTooManyFiles),
    /// [`SkillTooLarge`](RegistryError::SkillTooLarge)), when a file's URI exceeds
    /// [`Limits::max_uri_bytes`](crate::limits::Limits::max_uri_bytes) ([`RegistryError::InvalidUri`]),
    /// when its `SKILL.md` or one of its files is already registered
    /// ([`RegistryError::Duplicate`]), or when it nests in another skill or holds one. The
    /// extension defines no change notification of its own; connections the skill's gate
    /// admits are told `notifications/resources/list_changed`, since its files are resources.
    pub fn add_skill(&mut self, skill: Skill) -> Result<(), RegistryError> {
        let gate = skill.gate.clone();
        let max = self.engine.config.limits.max_uri_bytes;
        self.engine.registry.add_skill(skill, max)?;
        self.engine.changed(List::Resources, gate.as_ref());
        Ok(())
    }

    /// Unregisters the skill whose `SKILL.md` is at `uri`, with its files, returning it if it
    /// was registered (told as [`add_skill`](Self::add_skill) tells).
    pub fn remove_skill(&mut self, uri: &str) -> Option<Skill> {
        let skill = self.engine.registry.remove_skill(uri)?;
        self.engine.changed(List::Resources, skill.gate.as_ref());
        Some(skill)
    }

    /// Whether a skill's `SKILL.md` is registered at `uri` (whatever its gate).
    pub fn has_skill(&self, uri: &str) -> bool {
        self.engine.registry.skills.contains_key(uri)
    }
}

impl<H: Clone> Engine<H> {
    /// Answers one of [`METHODS`].
    pub(in crate::engine) fn skills_method(
        &self,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<&Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        match method {
            "skills/list" => self.list_skills(ctx, params),
            "skills/get" => self.get_skill(ctx, params),
            _ => self.read_directory(ctx, params),
        }
    }

    /// The `ttlMs`, `cacheScope`, `resultType` and `_meta` a result ends with, as JSON members
    /// (each preceded by a comma), for a result written as text.
    fn tail(&self, ctx: Ctx<'_>, hint: Option<CacheHint>) -> String {
        let mut tail = Map::new();
        if let Some(hint) = hint {
            self.cacheable(&mut tail, ctx.version, hint);
        }
        self.finish(&mut tail, ctx.version);
        let mut out = String::new();
        for (k, v) in tail {
            out.push(',');
            out.push_str(&Value::String(k).to_string());
            out.push(':');
            out.push_str(&v.to_string());
        }
        out
    }

    /// One page of `skills/list`: the entries the caller's gates admit, in `SKILL.md` URI
    /// order, each whole. A page ends after [`Limits::page_size`](crate::limits::Limits::page_size)
    /// entries or before the entry that would take it past half of
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes), whichever comes
    /// first (a page always holds at least one entry), so a catalogue of large manifests still
    /// pages instead of overflowing the response ceiling.
    fn list_skills(&self, ctx: Ctx<'_>, params: Option<&Map<String, Value>>) -> Result<Vec<u8>, RpcError> {
        const METHOD: &str = SkillEntry::METHOD;
        let skills = &self.registry.skills;
        let after = self.page_bounds(ctx, METHOD, params, skills.cursor_key_bound(&self.config.limits))?;
        let caller = self.caller(ctx.conn);
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut visible = skills
            .range::<str, _>((start, Bound::Unbounded))
            .filter(|(_, s)| admits(s.skill.gate.as_ref(), &caller))
            .peekable();
        let budget = self.config.limits.max_response_bytes / 2;
        let mut body = format!("{{\"{}\":[", SkillEntry::KEY);
        let mut last = None;
        let mut count = 0;
        while let Some((k, s)) = visible.peek() {
            let full = count >= self.config.limits.page_size
                || (count > 0 && body.len().saturating_add(s.entry.len()) > budget);
            if full {
                break;
            }
            if count > 0 {
                body.push(',');
            }
            body.push_str(&s.entry);
            last = Some(*k);
            count += 1;
            visible.next();
        }
        body.push(']');
        if let (Some(last), Some(_)) = (last, visible.peek()) {
            let next = cursor::make(&self.config.keys, METHOD, caller.binding(), last);
            body.push_str(",\"nextCursor\":");
            body.push_str(&Value::String(next).to_string());
        }
        let private = ctx.private || skills.any_gated();
        body.push_str(&self.tail(ctx, Some(self.config.list_cache.narrowed(private))));
        body.push('}');
        Ok(encode_result_text(ctx.id, &body))
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`, or `-32602` (with
    /// `data.uri`) when no skill the caller may see is there.
    fn get_skill(&self, ctx: Ctx<'_>, params: Option<&Map<String, Value>>) -> Result<Vec<u8>, RpcError> {
        let uri = self.checked_uri(params)?;
        let caller = self.caller(ctx.conn);
        let Some(entry) = self.registry.skills.get(uri).filter(|s| admits(s.skill.gate.as_ref(), &caller))
        else {
            return Err(RpcError::invalid_params(format!("no skill is served at {uri}"))
                .with_data(serde_json::json!({ "uri": uri })));
        };
        let hint = entry.skill.cache.narrowed(ctx.private || entry.skill.gate.is_some());
        let mut body = String::from("{\"skill\":");
        body.push_str(&entry.entry);
        body.push_str(&self.tail(ctx, Some(hint)));
        body.push('}');
        Ok(encode_result_text(ctx.id, &body))
    }

    /// `resources/directory/read`: one page of the direct children of a skill's directory,
    /// files with their resource metadata and subdirectories as `inode/directory`, in URI
    /// order, paged like `resources/list` (a cursor is good for the directory it came from
    /// only). `-32602` (with `data.uri`) for anything that is not
    /// a directory of a skill the caller may see: a file, an unknown URI, a refused skill.
    fn read_directory(&self, ctx: Ctx<'_>, params: Option<&Map<String, Value>>) -> Result<Vec<u8>, RpcError> {
        const METHOD: &str = "resources/directory/read";
        let uri = self.checked_uri(params)?;
        let caller = self.caller(ctx.conn);
        let children = self
            .registry
            .skill_dirs
            .get(uri)
            .and_then(|skill| self.registry.skills.get(skill))
            .filter(|s| admits(s.skill.gate.as_ref(), &caller))
            .and_then(|s| s.dirs.get(uri));
        let Some(children) = children else {
            return Err(RpcError::invalid_params(format!("{uri} is not a directory resource"))
                .with_data(serde_json::json!({ "uri": uri })));
        };
        let max_key = self.config.limits.max_uri_bytes.max(self.registry.resources.longest_key());
        // A cursor names the directory it pages, so it cannot be replayed on another one.
        let scope = format!("{METHOD} {uri}");
        let after = self.page_bounds(ctx, &scope, params, max_key)?;
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut page = children.range::<str, _>((start, Bound::Unbounded));
        let mut body = String::from("{\"resources\":[");
        let mut last = None;
        for (k, listing) in page.by_ref().take(self.config.limits.page_size) {
            if last.is_some() {
                body.push(',');
            }
            body.push_str(listing);
            last = Some(k);
        }
        body.push(']');
        if let (Some(last), Some(_)) = (last, page.next()) {
            let next = cursor::make(&self.config.keys, &scope, caller.binding(), last);
            body.push_str(",\"nextCursor\":");
            body.push_str(&Value::String(next).to_string());
        }
        // A directory result is paginated, not cacheable: no `ttlMs` or `cacheScope`.
        body.push_str(&self.tail(ctx, None));
        body.push('}');
        Ok(encode_result_text(ctx.id, &body))
    }

    /// A `resources/read` of a skill's file the caller may see, answered at once from the
    /// registry; `None` when `uri` is no such file (the read goes on to handlers and templates).
    pub(in crate::engine) fn read_skill_file(
        &self,
        ctx: Ctx<'_>,
        uri: &str,
        caller: &Caller,
    ) -> Option<Vec<u8>> {
        let entry = self.registry.resources.get(uri)?;
        let Source::Skill(file) = &entry.source else { return None };
        if !admits(entry.resource.info.gate.as_ref(), caller) {
            return None;
        }
        // As for any read: private when a gate could shape the answer (the server's, the
        // skill's, a gated template's that matches), and private with TTL 0 on a retry.
        let shaped = ctx.private
            || entry.resource.info.gate.is_some()
            || self
                .registry
                .templates
                .values()
                .any(|t| t.template.info.gate.is_some() && t.matcher.matches(uri).is_some());
        let retried = ctx.mrtr.is_some_and(|m| m.round > 0 || !m.answers.is_empty());
        let hint = if retried { CacheHint::private() } else { entry.resource.cache.narrowed(shaped) };
        let contents = [file.contents()];
        let mut r = Map::new();
        r.insert(
            "contents".into(),
            serde_json::to_value(ContentsWire(&contents, ctx.version)).unwrap_or_default(),
        );
        self.cacheable(&mut r, ctx.version, hint);
        self.finish(&mut r, ctx.version);
        Some(encode_result(ctx.id, &r))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crate::cursor::KeyRing;
    use crate::engine::{Config, Engine, Implementation};
    use crate::skills::Skill;

    #[test]
    fn a_skills_files_go_only_with_their_skill() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine: Engine<u32> =
            Engine::new(Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32])), now);
        let mut r = engine.registry_mut(now);
        r.add_skill(Skill::new("skill://s", "d", "b").file("a.md", "text/markdown", "a")).unwrap();
        assert!(r.remove_resource("skill://s/SKILL.md").is_none());
        assert!(r.remove_resource("skill://s/a.md").is_none());
        assert!(r.has_skill("skill://s/SKILL.md"));
        assert!(r.remove_skill("skill://s/SKILL.md").is_some());
        assert!(!r.has_skill("skill://s/SKILL.md"));
        assert_eq!(engine.introspect().resources.len(), 0);
    }
}
