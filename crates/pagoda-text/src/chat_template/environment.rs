//! The minijinja environment that stands in for transformers' sandboxed Jinja2 environment.
//!
//! transformers renders with `trim_blocks` and `lstrip_blocks` on, adds `raise_exception`,
//! `strftime_now` and a `tojson` filter that is plain `json.dumps`, and the templates call
//! Python string and dict methods; pycompat supplies those methods here.
use std::fmt;

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Output, State};

use super::pyjson::{self, DumpOptions};
use super::strftime;

/// The name the template is stored under; it shows up in minijinja's error locations.
pub const TEMPLATE_NAME: &str = "chat_template";

/// Marks an error raised on purpose by the template through `raise_exception(msg)`.
#[derive(Debug)]
pub struct RaisedByTemplate;

impl fmt::Display for RaisedByTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("raised by the chat template")
    }
}

impl std::error::Error for RaisedByTemplate {}

/// Builds the environment and compiles `source` into it. `fixed_now` pins `strftime_now`
/// to a Unix time (for reproducible prompts); `None` reads the clock at each call.
pub fn build(source: String, fixed_now: Option<i64>) -> Result<Environment<'static>, Error> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(python_formatter);
    env.add_filter("tojson", tojson);
    env.add_filter("string", python_str);
    env.add_filter("trim", trim);
    env.add_filter("length", length);
    env.add_filter("count", length);
    env.add_test("iterable", is_iterable);
    env.add_test("sequence", is_sequence);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", move |format: String| {
        strftime::strftime(&format, fixed_now.unwrap_or_else(strftime::unix_now))
    });
    env.add_template_owned(TEMPLATE_NAME, generation_blocks_as_plain_blocks(&source))?;
    Ok(env)
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message).with_source(RaisedByTemplate))
}

/// `tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False)`, the
/// signature transformers gives its filter, positional or by keyword.
fn tojson(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let arg = |pos: usize, name: &str| -> Result<Option<Value>, Error> {
        match kwargs.get::<Option<Value>>(name)? {
            Some(v) => Ok(Some(v)),
            None => Ok(args.get(pos).cloned()),
        }
    };
    let indent = match arg(1, "indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => Some(" ".repeat(usize::try_from(v)?)),
        },
    };
    let mut options = DumpOptions::new(indent);
    options.ensure_ascii = arg(0, "ensure_ascii")?.is_some_and(|v| v.is_true());
    options.sort_keys = arg(3, "sort_keys")?.is_some_and(|v| v.is_true());
    if let Some(separators) = arg(2, "separators")?.filter(|v| !v.is_none()) {
        let parts: Vec<Value> = separators.try_iter()?.collect();
        match parts.as_slice() {
            [item, key] => {
                options.item_separator = item.to_string();
                options.key_separator = key.to_string();
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson separators must be an (item, key) pair",
                ))
            }
        }
    }
    kwargs.assert_all_used()?;
    Ok(Value::from(pyjson::dumps(value, &options)?))
}

/// Prints values as Jinja2 on Python does: `None`, `True`, `1.0`, and containers as their
/// Python `repr`. Undefined prints as nothing, as with Jinja2's default `Undefined`.
fn python_formatter(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    let text = match value.kind() {
        ValueKind::Undefined => return Ok(()),
        ValueKind::None | ValueKind::Bool | ValueKind::Seq | ValueKind::Map => pyjson::repr(value),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(f) => pyjson::python_float(f),
            Err(_) => value.to_string(),
        },
        _ => return minijinja::escape_formatter(out, state, value),
    };
    out.write_str(&text).map_err(Error::from)
}

/// Python's `str(value)`: strings as they are, everything else as its `repr`.
fn python_str_of(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        ValueKind::Undefined => String::new(),
        _ => pyjson::repr(value),
    }
}

/// `string`: Jinja2 calls `str()`, so dicts and lists come out as Python literals.
fn python_str(value: &Value) -> Value {
    if value.is_safe() || value.kind() == ValueKind::String {
        return value.clone();
    }
    Value::from(python_str_of(value))
}

/// `trim(chars=None)`: `str(value).strip(chars)`.
fn trim(value: &Value, chars: Option<String>) -> String {
    let text = python_str_of(value);
    match chars {
        Some(chars) => text.trim_matches(|c| chars.contains(c)).to_string(),
        None => text.trim().to_string(),
    }
}

/// `length`: Python's `len()`. Jinja2's undefined has length 0; `None` has none.
fn length(value: &Value) -> Result<usize, Error> {
    if value.is_undefined() {
        return Ok(0);
    }
    value.len().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("object of type {} has no len()", value.kind()),
        )
    })
}

/// Jinja2's `iterable` test: whatever `iter()` accepts, which includes undefined but not
/// `None` (minijinja iterates `none` as empty, so its own test says yes).
fn is_iterable(value: &Value) -> bool {
    !matches!(
        value.kind(),
        ValueKind::None | ValueKind::Bool | ValueKind::Number
    )
}

/// Jinja2's `sequence` test: anything with a length and indexing: strings, lists, dicts,
/// and undefined.
fn is_sequence(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Undefined
    )
}

/// transformers' `{% generation %}...{% endgeneration %}` only marks the assistant's tokens
/// for training masks; its body renders as is. minijinja has no such tag, so each is
/// rewritten as an `{% if true %}`/`{% endif %}` with the same whitespace control markers,
/// which renders identically under trim_blocks and lstrip_blocks.
fn generation_blocks_as_plain_blocks(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let open = inner.strip_prefix(['-', '+']).map_or("", |_| &inner[..1]);
        let close = inner
            .strip_suffix(['-', '+'])
            .map_or("", |_| &inner[inner.len() - 1..]);
        let word = inner[open.len()..inner.len() - close.len()].trim();
        match word {
            "generation" => out.push_str(&format!("{{%{open} if true {close}%}}")),
            "endgeneration" => out.push_str(&format!("{{%{open} endif {close}%}}")),
            _ => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_become_plain_blocks_keeping_whitespace_control() {
        assert_eq!(
            generation_blocks_as_plain_blocks(
                "a{%- generation %}b{% endgeneration -%}c{{ x }}{% if y %}"
            ),
            "a{%- if true %}b{% endif -%}c{{ x }}{% if y %}"
        );
    }
}
