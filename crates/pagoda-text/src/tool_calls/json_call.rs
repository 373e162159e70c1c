//! One call as JSON: `{"name": ..., "arguments" | "parameters": {...}}`.

use serde_json::Value;

/// A parsed call: the function's name and its arguments as compact JSON text (what OpenAI's
/// `function.arguments` carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// A call from its JSON object; arguments given as a JSON string are parsed first so that
/// clients always get an object's text.
pub fn from_value(value: &Value) -> Option<ToolCall> {
    let object = value.as_object()?;
    let name = object.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(text)) => serde_json::from_str(text).ok()?,
        Some(other) => other.clone(),
    };
    if !arguments.is_object() {
        return None;
    }
    Some(ToolCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
    })
}

/// A call from JSON text.
pub fn from_text(text: &str) -> Option<ToolCall> {
    from_value(&serde_json::from_str(text.trim()).ok()?)
}
