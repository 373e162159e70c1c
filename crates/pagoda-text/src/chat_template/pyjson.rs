//! Python's `json.dumps` and `repr` over template values.
//!
//! Templates are written against Python: transformers' `tojson` is `json.dumps` (", " and ": "
//! separators, no HTML escaping), and printing a dict or list shows its `repr`. Matching both
//! byte for byte is what makes tool schemas in prompts match the checkpoint's training data.
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// The knobs of `json.dumps` that chat templates use.
pub struct DumpOptions {
    pub ensure_ascii: bool,
    /// `None`: one line. `Some(s)`: one item per line, each level indented by `s`.
    pub indent: Option<String>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
}

impl DumpOptions {
    /// Python's defaults for the given indent: `", "` between items on one line, `","` when
    /// every item gets its own line.
    pub fn new(indent: Option<String>) -> DumpOptions {
        let item_separator = if indent.is_some() { "," } else { ", " };
        DumpOptions {
            ensure_ascii: false,
            indent,
            item_separator: item_separator.to_string(),
            key_separator: ": ".to_string(),
            sort_keys: false,
        }
    }
}

pub fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let mut out = String::new();
    write_json(&mut out, value, options, 0)?;
    Ok(out)
}

fn write_json(
    out: &mut String,
    value: &Value,
    opts: &DumpOptions,
    depth: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "Object of type Undefined is not JSON serializable",
            ))
        }
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&number(value)),
        ValueKind::String | ValueKind::Bytes => {
            write_json_string(out, value.as_str().unwrap_or_default(), opts.ensure_ascii)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, '[', ']', &items, opts, depth, |out, item, depth| {
                write_json(out, item, opts, depth)
            })?;
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if opts.sort_keys {
                keys.sort_by_key(|k| k.to_string());
            }
            write_container(out, '{', '}', &keys, opts, depth, |out, key, depth| {
                match key.as_str() {
                    Some(s) => write_json_string(out, s, opts.ensure_ascii),
                    // Python turns number, bool and null keys into strings.
                    None => write_json_string(out, &key_string(key), opts.ensure_ascii),
                }
                out.push_str(&opts.key_separator);
                write_json(out, &value.get_item(key)?, opts, depth)
            })?;
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("Object of type {} is not JSON serializable", value.kind()),
            ))
        }
    }
    Ok(())
}

fn write_container(
    out: &mut String,
    open: char,
    close: char,
    items: &[Value],
    opts: &DumpOptions,
    depth: usize,
    mut write_item: impl FnMut(&mut String, &Value, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&opts.item_separator);
        }
        if let Some(indent) = &opts.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth + 1));
        }
        write_item(out, item, depth + 1)?;
    }
    if let Some(indent) = &opts.indent {
        out.push('\n');
        out.push_str(&indent.repeat(depth));
    }
    out.push(close);
    Ok(())
}

fn key_string(key: &Value) -> String {
    match key.kind() {
        ValueKind::None => "null".to_string(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_string(),
        ValueKind::Number => number(key),
        _ => key.to_string(),
    }
}

/// A number as Python prints it: floats keep a `.0`, integers do not.
fn number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(f) => python_float(f),
        Err(_) => value.to_string(),
    }
}

pub fn python_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        (if f > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
    } else if f.fract() == 0.0 && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

fn write_json_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => push_unicode_escape(out, c as u32),
            // With ensure_ascii Python escapes everything outside ' '..'~', DEL included.
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_unicode_escape(out, u32::from(*unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_unicode_escape(out: &mut String, unit: u32) {
    out.push_str(&format!("\\u{unit:04x}"));
}

/// Python's `repr` of a value, for printing containers the way Jinja2 does.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

fn write_repr(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number(value)),
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            out.push('[');
            for (i, item) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &item);
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &key);
                out.push_str(": ");
                write_repr(out, &value.get_item(&key).unwrap_or_default());
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(json: &str) -> Value {
        Value::from_serialize(serde_json::from_str::<serde_json::Value>(json).unwrap())
    }

    #[test]
    fn dumps_matches_python_default_separators() {
        let v = value(r#"{"b": [1, 2.5, 3.0], "a": {"x": null, "y": true}}"#);
        assert_eq!(
            dumps(&v, &DumpOptions::new(None)).unwrap(),
            r#"{"b": [1, 2.5, 3.0], "a": {"x": null, "y": true}}"#
        );
    }

    #[test]
    fn dumps_with_indent_puts_items_on_lines() {
        let v = value(r#"{"a": [1, {}], "b": []}"#);
        let out = dumps(&v, &DumpOptions::new(Some("  ".into()))).unwrap();
        assert_eq!(out, "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
    }

    #[test]
    fn ensure_ascii_escapes_non_ascii_as_utf16() {
        let v = Value::from("é😀<\u{7f}");
        let mut opts = DumpOptions::new(None);
        assert_eq!(dumps(&v, &opts).unwrap(), "\"é😀<\u{7f}\"");
        opts.ensure_ascii = true;
        assert_eq!(dumps(&v, &opts).unwrap(), r#""\u00e9\ud83d\ude00<\u007f""#);
    }

    #[test]
    fn repr_prints_python_literals() {
        let v = value(r#"{"a": [true, null, "it's"], "b": 1.0}"#);
        assert_eq!(repr(&v), r#"{'a': [True, None, "it's"], 'b': 1.0}"#);
    }
}
