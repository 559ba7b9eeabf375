//! Elicitation forms: which property schemas a form may hold, whether a value fits one, and the
//! lexical checks (numbers by their text, formats) both need.

use std::cmp::Ordering;

use serde_json::{json, Map, Number, Value};

use crate::json::{clip, number_text};

// ---------------------------------------------------------------------------------------------
// Elicitation schemas and answers
// ---------------------------------------------------------------------------------------------

const NESTED: &str = "is a nested object; elicitation schemas are flat: every property must be a string, \
                      number, integer, boolean or multi-select array";
const NESTED_ITEMS: &str = "is an array of objects; elicitation schemas are flat: arrays are multi-selects \
                            of string options";

/// One form field, as read from a validated property schema.
pub(super) enum Field<'a> {
    Text {
        format: Option<&'a str>,
        min_len: Option<u64>,
        max_len: Option<u64>,
        options: Option<Vec<&'a str>>,
    },
    Number {
        integer: bool,
        minimum: Option<&'a Number>,
        maximum: Option<&'a Number>,
    },
    Boolean,
    Multi {
        options: Vec<&'a str>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

pub(super) fn validate_schema(schema: Value) -> Result<Map<String, Value>, String> {
    let Value::Object(top) = schema else {
        return Err("the requested schema must be a JSON object".into());
    };
    for key in top.keys() {
        if !matches!(key.as_str(), "type" | "properties" | "required" | "$schema" | "title" | "description") {
            return Err(format!(
                "keyword `{}` is not allowed at the top of an elicitation schema",
                clip(key)
            ));
        }
    }
    if top.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema needs `\"type\": \"object\"`".into());
    }
    for key in ["$schema", "title", "description"] {
        if top.get(key).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{key}` must be a string"));
        }
    }
    let Some(props) = top.get("properties").and_then(Value::as_object) else {
        return Err("the requested schema needs a `properties` object".into());
    };
    for (name, prop) in props {
        let field = field(prop).map_err(|m| format!("property `{}` {m}", clip(name)))?;
        if let Some(default) = prop.get("default") {
            check_value(&field, default).map_err(|m| format!("property `{}`: `default` {m}", clip(name)))?;
        }
    }
    if let Some(required) = top.get("required") {
        let Some(required) = required.as_array() else {
            return Err("`required` must be an array of property names".into());
        };
        for r in required {
            match r.as_str() {
                Some(name) if props.contains_key(name) => {}
                Some(name) => {
                    return Err(format!("`required` names `{}`, which is not a property", clip(name)))
                }
                None => return Err("`required` must be an array of property names".into()),
            }
        }
    }
    Ok(top)
}

/// Reads one property schema, refusing anything a form cannot show.
pub(super) fn field(prop: &Value) -> Result<Field<'_>, String> {
    let Some(p) = prop.as_object() else {
        return Err("must be a schema object".into());
    };
    let ty = match p.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("needs one `type` string (type unions are not allowed)".into()),
        None if p.contains_key("properties") => return Err(NESTED.into()),
        None => return Err("needs a `type`".into()),
    };
    const COMMON: [&str; 4] = ["type", "title", "description", "default"];
    let extra: &[&str] = match ty {
        "string" => &["format", "minLength", "maxLength", "enum", "enumNames", "oneOf"],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["items", "minItems", "maxItems"],
        "object" => return Err(NESTED.into()),
        other => {
            return Err(format!(
                "has type `{}`; allowed: string, number, integer, boolean, array (multi-select)",
                clip(other)
            ))
        }
    };
    if let Some(k) = p.keys().find(|k| !COMMON.contains(&k.as_str()) && !extra.contains(&k.as_str())) {
        return Err(format!("uses keyword `{}`, which elicitation schemas do not allow on a {ty}", clip(k)));
    }
    for k in ["title", "description"] {
        if p.get(k).is_some_and(|v| !v.is_string()) {
            return Err(format!("has a non-string `{k}`"));
        }
    }
    match ty {
        "string" => {
            let options = match (p.get("enum"), p.get("oneOf")) {
                (Some(_), Some(_)) => return Err("uses both `enum` and `oneOf`; use one".into()),
                (Some(e), None) => {
                    let options = string_options(e, "enum")?;
                    if let Some(names) = p.get("enumNames") {
                        if string_options(names, "enumNames")?.len() != options.len() {
                            return Err("has `enumNames` of a different length than `enum`".into());
                        }
                    }
                    Some(options)
                }
                (None, Some(o)) => {
                    if p.contains_key("enumNames") {
                        return Err("uses `enumNames` with `oneOf`; titles go in `oneOf`".into());
                    }
                    Some(titled_options(o, "oneOf")?)
                }
                (None, None) if p.contains_key("enumNames") => {
                    return Err("uses `enumNames` without `enum`".into())
                }
                (None, None) => None,
            };
            if options.is_some() && ["format", "minLength", "maxLength"].iter().any(|k| p.contains_key(*k)) {
                return Err(
                    "mixes a choice with `format`/`minLength`/`maxLength`, which apply to free text only"
                        .into(),
                );
            }
            let format = match p.get("format") {
                None => None,
                Some(Value::String(f)) if matches!(f.as_str(), "email" | "uri" | "date" | "date-time") => {
                    Some(f.as_str())
                }
                Some(_) => return Err("has a `format` other than email, uri, date or date-time".into()),
            };
            let (min_len, max_len) = bounds(p, "minLength", "maxLength")?;
            Ok(Field::Text { format, min_len, max_len, options })
        }
        "number" | "integer" => {
            let number = |k: &str| match p.get(k) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(n)),
                Some(_) => Err(format!("has a non-numeric `{k}`")),
            };
            let (minimum, maximum) = (number("minimum")?, number("maximum")?);
            if let (Some(lo), Some(hi)) = (minimum, maximum) {
                if decimal_cmp(&number_text(lo), &number_text(hi)).is_none_or(|o| o == Ordering::Greater) {
                    return Err("has `minimum` above `maximum`".into());
                }
            }
            Ok(Field::Number { integer: ty == "integer", minimum, maximum })
        }
        "boolean" => Ok(Field::Boolean),
        _ => {
            let Some(items) = p.get("items").and_then(Value::as_object) else {
                return Err("is an array without an `items` object".into());
            };
            let items_type = items.get("type");
            if items_type.and_then(Value::as_str) == Some("object") || items.contains_key("properties") {
                return Err(NESTED_ITEMS.into());
            }
            let options = if let Some(e) = items.get("enum") {
                if items.keys().any(|k| k != "type" && k != "enum") || items_type != Some(&json!("string")) {
                    return Err(
                        "has `items` that must be exactly `{\"type\": \"string\", \"enum\": [...]}`".into()
                    );
                }
                string_options(e, "items.enum")?
            } else if let Some(a) = items.get("anyOf") {
                if items.keys().any(|k| k != "type" && k != "anyOf")
                    || items_type.is_some_and(|t| t != &json!("string"))
                {
                    return Err(
                        "has `items` that must be exactly `{\"anyOf\": [{\"const\", \"title\"}, ...]}`"
                            .into(),
                    );
                }
                titled_options(a, "items.anyOf")?
            } else {
                return Err(
                    "is an array whose `items` is neither `{\"type\": \"string\", \"enum\": [...]}` nor \
                            `{\"anyOf\": [{\"const\", \"title\"}, ...]}`"
                        .into(),
                );
            };
            let (min_items, max_items) = bounds(p, "minItems", "maxItems")?;
            Ok(Field::Multi { options, min_items, max_items })
        }
    }
}

/// A non-empty array of strings.
fn string_options<'a>(v: &'a Value, what: &str) -> Result<Vec<&'a str>, String> {
    let options: Option<Vec<&str>> = v.as_array().and_then(|a| a.iter().map(Value::as_str).collect());
    match options {
        Some(o) if !o.is_empty() => Ok(o),
        _ => Err(format!("needs `{what}` to be a non-empty array of strings")),
    }
}

/// A non-empty array of `{"const": string, "title": string}`; returns the consts.
fn titled_options<'a>(v: &'a Value, what: &str) -> Result<Vec<&'a str>, String> {
    let err =
        || format!("needs `{what}` to be a non-empty array of `{{\"const\": string, \"title\": string}}`");
    let items = v.as_array().filter(|a| !a.is_empty()).ok_or_else(err)?;
    items
        .iter()
        .map(|o| {
            let o = o.as_object().filter(|o| o.len() == 2 && o.get("title").is_some_and(Value::is_string));
            o.and_then(|o| o.get("const")?.as_str()).ok_or_else(err)
        })
        .collect()
}

/// Optional non-negative integer bounds, lower not above upper.
fn bounds(p: &Map<String, Value>, lo: &str, hi: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let read = |k: &str| match p.get(k) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("needs `{k}` to be a non-negative integer")),
    };
    let (min, max) = (read(lo)?, read(hi)?);
    if let (Some(a), Some(b)) = (min, max) {
        if a > b {
            return Err(format!("has `{lo}` above `{hi}`"));
        }
    }
    Ok((min, max))
}

/// Whether `value` is an acceptable value of `field`; the error completes "<field> ...".
pub(super) fn check_value(field: &Field<'_>, value: &Value) -> Result<(), String> {
    match field {
        Field::Text { format, min_len, max_len, options } => {
            let Some(s) = value.as_str() else {
                return Err("must be a string".into());
            };
            if let Some(options) = options {
                if !options.contains(&s) {
                    return Err("is not one of the offered options".into());
                }
            }
            let chars = u64::try_from(s.chars().count()).unwrap_or(u64::MAX);
            if min_len.is_some_and(|m| chars < m) || max_len.is_some_and(|m| chars > m) {
                return Err("has a length outside `minLength`..`maxLength`".into());
            }
            let format_ok = match *format {
                Some("email") => is_email(s),
                Some("uri") => is_uri(s),
                Some("date") => is_date(s),
                Some("date-time") => is_date_time(s),
                _ => true,
            };
            if !format_ok {
                return Err(format!("is not a valid {}", format.unwrap_or_default()));
            }
            Ok(())
        }
        Field::Number { integer, minimum, maximum } => {
            let Value::Number(n) = value else {
                return Err(if *integer { "must be an integer" } else { "must be a number" }.into());
            };
            if *integer && !is_integer_text(n) {
                return Err("must be an integer (no fraction or exponent)".into());
            }
            // A bound that cannot be compared (not number syntax) counts as crossed.
            let cmp = |m: &Number| decimal_cmp(&number_text(n), &number_text(m));
            let below = minimum.is_some_and(|m| cmp(m).is_none_or(|o| o == Ordering::Less));
            let above = maximum.is_some_and(|m| cmp(m).is_none_or(|o| o == Ordering::Greater));
            if below || above {
                return Err("is outside `minimum`..`maximum`".into());
            }
            Ok(())
        }
        Field::Boolean => value.is_boolean().then_some(()).ok_or_else(|| "must be a boolean".into()),
        Field::Multi { options, min_items, max_items } => {
            let Some(items) = value.as_array() else {
                return Err("must be an array of the offered options".into());
            };
            if items.iter().any(|i| i.as_str().is_none_or(|s| !options.contains(&s))) {
                return Err("must be an array of the offered options".into());
            }
            let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err("has a number of choices outside `minItems`..`maxItems`".into());
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lexical checks: numbers by their text, formats
// ---------------------------------------------------------------------------------------------

/// An integer literal: the exact text has no fraction and no exponent.
pub(super) fn is_integer_text(n: &Number) -> bool {
    !number_text(n).contains(['.', 'e', 'E'])
}

/// A JSON number's text as sign, significant digits (no leading or trailing zeros) and the power
/// of ten of the last digit. `None` when it is not JSON number syntax.
fn parse_decimal(text: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (rest.get(..i)?, parse_exponent(rest.get(i + 1..)?)?),
        None => (rest, 0),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((_, "")) => return None,
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).skip_while(|&b| b == b'0').collect();
    let mut exponent = exponent.saturating_sub(i64::try_from(frac.len()).unwrap_or(i64::MAX));
    while digits.last() == Some(&b'0') {
        digits.pop();
        exponent = exponent.saturating_add(1);
    }
    Some((negative && !digits.is_empty(), digits, exponent))
}

fn parse_exponent(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..)?),
        Some(b'+') => (false, s.get(1..)?),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    // Saturate far beyond any meaningful exponent; only absurd texts reach the clamp.
    let magnitude = digits.bytes().try_fold(0i64, |acc, b| {
        b.is_ascii_digit().then(|| acc.saturating_mul(10).saturating_add(i64::from(b - b'0')).min(1 << 40))
    })?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Compares two JSON number texts exactly (so `1e30` vs a 30-digit integer is decided right).
pub(super) fn decimal_cmp(a: &str, b: &str) -> Option<Ordering> {
    let (an, ad, ae) = parse_decimal(a)?;
    let (bn, bd, be) = parse_decimal(b)?;
    let magnitude = |d: &[u8], e: i64| i64::try_from(d.len()).unwrap_or(i64::MAX).saturating_add(e);
    let abs = match (ad.is_empty(), bd.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Same position of the leading digit: digit strings without trailing zeros compare
        // lexicographically, a strict prefix being the smaller.
        (false, false) => magnitude(&ad, ae).cmp(&magnitude(&bd, be)).then_with(|| ad.cmp(&bd)),
    };
    Some(match (an, bn) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (true, true) => abs.reverse(),
        (false, false) => abs,
    })
}

fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `scheme:rest`, RFC 3986 scheme syntax, no spaces.
pub(super) fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !has_space_or_control(s)
}

/// `local@domain`, one `@`, both sides non-empty, no spaces.
pub(super) fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else { return false };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !has_space_or_control(s)
}

fn two_digits(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(2)?)?
        .iter()
        .try_fold(0u32, |acc, c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
}

/// RFC 3339 `full-date` at the start of `b`.
fn date_prefix(b: &[u8]) -> Option<()> {
    let year = two_digits(b, 0)? * 100 + two_digits(b, 2)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (month, day) = (two_digits(b, 5)?, two_digits(b, 8)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&day).then_some(())
}

pub(super) fn is_date(s: &str) -> bool {
    s.len() == 10 && date_prefix(s.as_bytes()).is_some()
}

/// RFC 3339 `date-time`: date, `T`, `HH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
pub(super) fn is_date_time(s: &str) -> bool {
    fn check(b: &[u8]) -> Option<()> {
        date_prefix(b)?;
        let sep = |at: usize, c: u8| (b.get(at) == Some(&c)).then_some(());
        matches!(b.get(10), Some(b'T' | b't')).then_some(())?;
        (two_digits(b, 11)? <= 23).then_some(())?;
        sep(13, b':')?;
        (two_digits(b, 14)? <= 59).then_some(())?;
        sep(16, b':')?;
        (two_digits(b, 17)? <= 60).then_some(())?;
        let mut i = 19;
        if b.get(i) == Some(&b'.') {
            let digits = b.iter().skip(i + 1).take_while(|c| c.is_ascii_digit()).count();
            (digits > 0).then_some(())?;
            i += 1 + digits;
        }
        match b.get(i)? {
            b'Z' | b'z' => (i + 1 == b.len()).then_some(()),
            b'+' | b'-' => {
                (two_digits(b, i + 1)? <= 23).then_some(())?;
                sep(i + 3, b':')?;
                (two_digits(b, i + 4)? <= 59).then_some(())?;
                (i + 6 == b.len()).then_some(())
            }
            _ => None,
        }
    }
    check(s.as_bytes()).is_some()
}
