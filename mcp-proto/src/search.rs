//! The search index behind compact publication's `search_tools`: an inverted index over the
//! tokens of every tool's name, title and description, kept up to date at registration so a
//! search never walks the catalogue.
//!
//! # How a search ranks
//!
//! The query and every indexed text are cut into tokens: runs of letters and digits, split
//! again where a lower-case letter meets an upper-case one (`fetchUrl` is `fetch`, `url`), and
//! lower-cased. Tokens longer than [`MAX_TOKEN_CHARS`] are not indexed. For each distinct query
//! term (the first [`MAX_QUERY_TERMS`]; later ones are ignored) a tool scores:
//!
//! - [`W_NAME`] when the term is a token of its name, or else [`W_NAME_PREFIX`] when the term
//!   (two characters or more) begins a token of its name;
//! - plus [`W_TITLE`] when the term is a token of its title;
//! - plus [`W_DESCRIPTION`] when the term is a token of its description.
//!
//! A tool's score is the sum over the terms, plus [`W_EXACT_NAME`] when the whole query is its
//! name (the engine adds that: it is a map lookup). Results are the highest scores first, ties
//! by name; a tool scoring nothing is no result.
//!
//! # What a search costs
//!
//! At most [`SEARCH_BUDGET`] index entries per search, whatever the catalogue's size: terms are
//! scored rarest first (the most selective first, as the idea of inverse document frequency
//! has it), each term's tools in name order, and a search that exhausts the budget ranks what it
//! scored so far. So a huge catalogue where a term is in every description drops that common
//! term's later tools, never a rare term's, and one search cannot stall the engine for the
//! other clients. Registering or removing a tool costs O(tokens × log(index)).
//!
//! The query itself is bounded before any of that: the engine refuses one longer than
//! [`Limits::max_search_query_bytes`](crate::limits::Limits::max_search_query_bytes) before reading it,
//! and [`Query::parse`] refuses one of more than
//! [`Limits::max_search_query_words`](crate::limits::Limits::max_search_query_words) words as soon as
//! it reads the word past the bound. A query is cut once, into slices of itself, and its terms
//! are lower-cased into one buffer: no allocation per word, so a flood of the longest queries
//! costs about what the same bytes cost as any other argument.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::tool::Tool;

/// Score of a query term that is a token of the tool's name.
pub(crate) const W_NAME: u32 = 10;
/// Score of a query term that begins a token of the tool's name (when no token equals it).
pub(crate) const W_NAME_PREFIX: u32 = 5;
/// Score of a query term that is a token of the tool's title.
pub(crate) const W_TITLE: u32 = 4;
/// Score of a query term that is a token of the tool's description.
pub(crate) const W_DESCRIPTION: u32 = 1;
/// Score added when the whole query is the tool's name, exactly.
pub(crate) const W_EXACT_NAME: u32 = 100;
/// Query terms a search considers: the first 16 distinct ones; later ones are ignored.
pub(crate) const MAX_QUERY_TERMS: usize = 16;
/// The longest token indexed or searched for, in characters: 64. Longer ones are skipped (an
/// identifier that long is no word a query would hold).
pub(crate) const MAX_TOKEN_CHARS: usize = 64;
/// Index entries one search may visit: 10 000. Past it the search ranks what it scored so far
/// (see the module documentation).
pub(crate) const SEARCH_BUDGET: usize = 10_000;

const NAME: u8 = 1;
const TITLE: u8 = 2;
const DESCRIPTION: u8 = 4;

/// The tokens of `text` as slices of it, not yet lower-cased (see the module documentation):
/// cutting allocates nothing, so a query costs one pass over its bytes.
struct Words<'a> {
    text: &'a str,
    chars: std::str::CharIndices<'a>,
    /// Where the token being read began, while one is.
    start: Option<usize>,
    prev_lower: bool,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, chars: text.char_indices(), start: None, prev_lower: false }
    }
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        loop {
            let Some((i, c)) = self.chars.next() else {
                let start = self.start.take()?;
                return self.text.get(start..);
            };
            if !c.is_alphanumeric() {
                self.prev_lower = false;
                match self.start.take() {
                    Some(start) => return self.text.get(start..i),
                    None => continue,
                }
            }
            let split = c.is_uppercase() && self.prev_lower;
            self.prev_lower = c.is_lowercase() || c.is_numeric();
            match self.start {
                Some(start) if split => {
                    self.start = Some(i);
                    return self.text.get(start..i);
                }
                Some(_) => {}
                None => self.start = Some(i),
            }
        }
    }
}

/// Whether `word`, lower-cased, is short enough to be a token ([`MAX_TOKEN_CHARS`]); counted
/// without lower-casing it into a buffer, and at most one character past the bound.
fn short_enough(word: &str) -> bool {
    word.chars().flat_map(char::to_lowercase).take(MAX_TOKEN_CHARS + 1).count() <= MAX_TOKEN_CHARS
}

/// Cuts text into lower-cased search tokens (see the module documentation). For indexing, where
/// one `String` per token is what the index keeps anyway; a query goes through [`Query::parse`].
pub(crate) fn tokens(text: &str) -> Vec<String> {
    Words::new(text)
        .filter(|w| short_enough(w))
        .map(|w| w.chars().flat_map(char::to_lowercase).collect())
        .collect()
}

/// A query with more words than the caller allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooManyWords {
    /// Words read before giving up: the bound plus one.
    pub(crate) considered: usize,
}

/// A search query cut once into its distinct lower-cased terms (the first [`MAX_QUERY_TERMS`]),
/// all held in one buffer.
#[derive(Debug, Default)]
pub(crate) struct Query {
    /// The terms, one after another.
    text: String,
    /// Where each term ends in `text` (each begins where the previous one ends).
    ends: Vec<usize>,
    /// Words read, terms or not (too long, repeated, past the terms considered).
    words: usize,
}

impl Query {
    /// Cuts `query` into its terms, refusing it when it holds more than `max_words` words; the
    /// cutting stops at the first word past the bound, so a refusal costs no more than the
    /// bound's worth of words.
    pub(crate) fn parse(query: &str, max_words: usize) -> Result<Self, TooManyWords> {
        let mut q = Query::default();
        for word in Words::new(query) {
            q.words += 1;
            if q.words > max_words {
                return Err(TooManyWords { considered: q.words });
            }
            if q.ends.len() == MAX_QUERY_TERMS || !short_enough(word) {
                continue;
            }
            let start = q.text.len();
            q.text.extend(word.chars().flat_map(char::to_lowercase));
            let repeated = q.text.get(start..).is_some_and(|t| q.terms().any(|seen| seen == t));
            if repeated {
                q.text.truncate(start);
            } else {
                q.ends.push(q.text.len());
            }
        }
        Ok(q)
    }

    /// The distinct terms, in the order the query has them.
    pub(crate) fn terms(&self) -> impl Iterator<Item = &str> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).filter_map(|(a, b)| self.text.get(a..b))
    }

    /// Whether the query has no term to look for.
    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Words read, terms or not.
    #[cfg(test)]
    pub(crate) fn words(&self) -> usize {
        self.words
    }
}

/// One search's outcome: the ranked tools admitted, and the work it took.
#[derive(Debug)]
pub(crate) struct Hits {
    /// Tool names with their scores, best first, ties by name.
    pub(crate) ranked: Vec<(Arc<str>, u32)>,
    /// Index entries visited (tokens and postings, at most [`SEARCH_BUDGET`]) plus candidates
    /// checked against the caller's gates (at most as many as were scored).
    pub(crate) work: usize,
}

/// The inverted index (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct SearchIndex {
    /// Every token, with the tools having it and in which fields (a bit set).
    terms: BTreeMap<String, BTreeMap<Arc<str>, u8>>,
    /// Name tokens alone, for prefix matches.
    name_terms: BTreeMap<String, BTreeSet<Arc<str>>>,
}

fn fields_of(tool: &Tool) -> BTreeMap<String, u8> {
    let mut fields: BTreeMap<String, u8> = BTreeMap::new();
    let mut add = |text: &str, bit: u8| {
        for t in tokens(text) {
            *fields.entry(t).or_default() |= bit;
        }
    };
    add(tool.name(), NAME);
    if let Some(t) = tool.declared_title() {
        add(t, TITLE);
    }
    if let Some(d) = tool.declared_description() {
        add(d, DESCRIPTION);
    }
    fields
}

impl SearchIndex {
    /// Indexes a tool (replacing nothing: the registry refuses duplicate names).
    pub(crate) fn insert(&mut self, tool: &Tool) {
        let name: Arc<str> = tool.name().into();
        for (token, bits) in fields_of(tool) {
            if bits & NAME != 0 {
                self.name_terms.entry(token.clone()).or_default().insert(name.clone());
            }
            self.terms.entry(token).or_default().insert(name.clone(), bits);
        }
    }

    /// Forgets a tool indexed with [`insert`](Self::insert).
    pub(crate) fn remove(&mut self, tool: &Tool) {
        for (token, bits) in fields_of(tool) {
            if bits & NAME != 0 {
                if let Some(p) = self.name_terms.get_mut(&token) {
                    p.remove(tool.name());
                    if p.is_empty() {
                        self.name_terms.remove(&token);
                    }
                }
            }
            if let Some(p) = self.terms.get_mut(&token) {
                p.remove(tool.name());
                if p.is_empty() {
                    self.terms.remove(&token);
                }
            }
        }
    }

    /// Ranks the tools against `query`, adding `bonus` to the scores it names (the exact-name
    /// match the caller found), and keeps the first `limit` that `admit` lets through.
    pub(crate) fn search(
        &self,
        query: &Query,
        bonus: Option<(&str, u32)>,
        limit: usize,
        mut admit: impl FnMut(&str) -> bool,
    ) -> Hits {
        // Rarest first: a common term's postings must not use up the budget a rare one needs.
        let mut ordered: Vec<(usize, &str)> =
            query.terms().map(|t| (self.terms.get(t).map_or(0, BTreeMap::len), t)).collect();
        ordered.sort();
        let mut work = 0usize;
        let mut scores: HashMap<Arc<str>, u32> = HashMap::new();
        'terms: for (_, term) in ordered {
            work += 1;
            // Per term a tool scores once for its name (exact or prefix), once per other field.
            let mut named: BTreeSet<Arc<str>> = BTreeSet::new();
            if let Some(postings) = self.terms.get(term) {
                for (tool, bits) in postings {
                    if work >= SEARCH_BUDGET {
                        break 'terms;
                    }
                    work += 1;
                    let mut s = 0;
                    if bits & NAME != 0 {
                        s += W_NAME;
                        named.insert(tool.clone());
                    }
                    if bits & TITLE != 0 {
                        s += W_TITLE;
                    }
                    if bits & DESCRIPTION != 0 {
                        s += W_DESCRIPTION;
                    }
                    *scores.entry(tool.clone()).or_default() += s;
                }
            }
            if term.chars().count() < 2 {
                continue;
            }
            let longer = self
                .name_terms
                .range::<str, _>((std::ops::Bound::Excluded(term), std::ops::Bound::Unbounded))
                .take_while(|(token, _)| token.starts_with(term));
            for (_, tools) in longer {
                work += 1;
                for tool in tools {
                    if work >= SEARCH_BUDGET {
                        break 'terms;
                    }
                    work += 1;
                    if named.insert(tool.clone()) {
                        *scores.entry(tool.clone()).or_default() += W_NAME_PREFIX;
                    }
                }
            }
        }
        if let Some((name, extra)) = bonus {
            *scores.entry(name.into()).or_default() += extra;
        }
        let mut ranked: Vec<(Arc<str>, u32)> = scores.into_iter().filter(|(_, s)| *s > 0).collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut kept = Vec::with_capacity(limit.min(ranked.len()));
        for (name, score) in ranked {
            if kept.len() == limit {
                break;
            }
            work += 1;
            if admit(&name) {
                kept.push((name, score));
            }
        }
        Hits { ranked: kept, work }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, title: Option<&str>, description: &str) -> Tool {
        let t = Tool::new(name, description, json!({"type": "object"}));
        match title {
            Some(title) => t.title(title),
            None => t,
        }
    }

    fn q(query: &str) -> Query {
        Query::parse(query, usize::MAX).unwrap()
    }

    fn names(hits: &Hits) -> Vec<&str> {
        hits.ranked.iter().map(|(n, _)| &**n).collect()
    }

    #[test]
    fn tokens_split_words_and_camel_case() {
        assert_eq!(
            tokens("fetchUrl get_weather HTTPServer v2.1"),
            ["fetch", "url", "get", "weather", "httpserver", "v2", "1"]
        );
        assert_eq!(tokens(&"x".repeat(MAX_TOKEN_CHARS + 1)), Vec::<String>::new());
        assert_eq!(tokens("Ünïcode Wörter"), ["ünïcode", "wörter"]);
    }

    #[test]
    fn a_query_is_cut_once_into_distinct_terms() {
        let query = q("fetchUrl FETCH url, Weather v2.1 weather");
        assert_eq!(query.terms().collect::<Vec<_>>(), ["fetch", "url", "weather", "v2", "1"]);
        assert_eq!(query.words(), 8, "repeats are words too");
        // A word too long to be a token is a word, not a term; the terms stop at the first 16.
        let long = format!("{} a", "x".repeat(MAX_TOKEN_CHARS + 1));
        let query = q(&long);
        assert_eq!((query.terms().collect::<Vec<_>>(), query.words()), (vec!["a"], 2));
        let many: String = (0..40).map(|i| format!("w{i} ")).collect();
        let query = q(&many);
        assert_eq!(query.terms().count(), MAX_QUERY_TERMS);
        assert_eq!(query.terms().last(), Some("w15"));
        assert_eq!(query.words(), 40);
        assert!(q(" ,;- ").is_empty() && q("").is_empty());
        // The terms are the tokens the index holds.
        for text in ["fetchUrl get_weather HTTPServer v2.1", "Ünïcode Wörter", "İstanbul ǅemal"] {
            assert_eq!(q(text).terms().collect::<Vec<_>>(), tokens(text), "{text:?}");
        }
    }

    #[test]
    fn the_word_bound_refuses_at_the_first_word_past_it() {
        assert_eq!(Query::parse("a b c", 3).map(|q| q.words()), Ok(3));
        assert_eq!(Query::parse("a b c d", 3).map(|q| q.words()), Err(TooManyWords { considered: 4 }));
        assert_eq!(Query::parse("a", 0).map(|q| q.words()), Err(TooManyWords { considered: 1 }));
        assert_eq!(Query::parse("  ", 0).map(|q| q.words()), Ok(0));
        // A frame's worth of words: reading stops one word past the bound.
        let huge = "ab ".repeat(700_000);
        assert_eq!(Query::parse(&huge, 64).map(|q| q.words()), Err(TooManyWords { considered: 65 }));
    }

    #[test]
    fn ranks_by_field_weights_then_name() {
        let mut index = SearchIndex::default();
        // "weather" in a name (10), a title (4), a description (1), a name prefix (5).
        index.insert(&tool("get_weather", None, "Current conditions"));
        index.insert(&tool("forecast", Some("Weather forecast"), "Days ahead"));
        index.insert(&tool("almanac", None, "Sunrise, tides and weather lore"));
        index.insert(&tool("weatherstation_read", None, "Raw sensor values"));
        index.insert(&tool("zeta_weather", None, "Also current"));
        index.insert(&tool("unrelated", None, "Nothing to see"));
        let hits = index.search(&q("weather"), None, 10, |_| true);
        assert_eq!(
            names(&hits),
            ["get_weather", "zeta_weather", "weatherstation_read", "forecast", "almanac"],
            "name 10 (ties by name), prefix 5, title 4, description 1"
        );
        let scores: Vec<u32> = hits.ranked.iter().map(|(_, s)| *s).collect();
        assert_eq!(scores, [10, 10, 5, 4, 1]);
        // Terms add up; the exact-name bonus beats everything.
        let hits = index.search(&q("current weather"), None, 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"get_weather"));
        assert_eq!(hits.ranked.first().map(|h| h.1), Some(11));
        let hits = index.search(&q("almanac"), Some(("almanac", W_EXACT_NAME)), 1, |_| true);
        assert_eq!(hits.ranked, vec![(Arc::from("almanac"), W_EXACT_NAME + W_NAME)]);
        // The limit and the admission filter: hidden tools are skipped, not counted.
        let hits = index.search(&q("weather"), None, 2, |n| n != "get_weather");
        assert_eq!(names(&hits), ["zeta_weather", "weatherstation_read"]);
        assert!(index.search(&q("nomatch"), None, 5, |_| true).ranked.is_empty());
    }

    #[test]
    fn removal_forgets_every_token() {
        let mut index = SearchIndex::default();
        let t = tool("get_weather", Some("Weather"), "Current conditions");
        index.insert(&t);
        index.insert(&tool("other", None, "conditions"));
        index.remove(&t);
        assert!(index.search(&q("weather"), None, 5, |_| true).ranked.is_empty());
        assert_eq!(names(&index.search(&q("conditions"), None, 5, |_| true)), ["other"]);
        assert!(!index.terms.contains_key("weather") && !index.name_terms.contains_key("get"));
    }

    /// Work, not time: a search visits at most the budget (plus a few terms and the candidates
    /// it checks), at 10k tools as at 100k, even when every tool matches a term.
    #[test]
    fn search_work_is_bounded_whatever_the_catalogue() {
        for n in [10_000usize, 100_000] {
            let mut index = SearchIndex::default();
            for i in 0..n {
                let description = format!("Reads widget {i} of shelf{} in the store", i % 100);
                index.insert(&tool(&format!("tool_{i}"), None, &description));
            }
            // "widget", "store", "tool" and the prefix "too" are in every tool; "shelf42" in 1%.
            for query in ["widget store", "tool_77 shelf42", "too", "tool_77"] {
                let hits = index.search(&q(query), None, 20, |_| true);
                assert!(hits.work <= 2 * SEARCH_BUDGET + MAX_QUERY_TERMS, "{query:?} at {n}: {}", hits.work);
                assert!(!hits.ranked.is_empty(), "{query:?} at {n}");
            }
            // The rare term is scored before the common ones use up the budget.
            let hits = index.search(&q("tool 77 shelf77"), None, 1, |_| true);
            assert_eq!(names(&hits), ["tool_77"], "at {n}");
        }
    }
}
