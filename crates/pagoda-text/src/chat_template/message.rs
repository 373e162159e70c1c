//! Chat messages as they arrive on the OpenAI wire, and as a template sees them.
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::error::{Result, TextError};

/// One message of an OpenAI chat request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Json>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with plain text content.
    pub fn text(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: Some(MessageContent::Text(content.to_string())),
            name: None,
            tool_calls: None,
            tool_call_id: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of a multi-part content list. Only `"text"` parts can be rendered; any other
/// `type` (image_url, input_audio, ...) is refused when rendering, naming the type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl ContentPart {
    pub fn text(text: &str) -> ContentPart {
        ContentPart {
            kind: "text".to_string(),
            text: Some(text.to_string()),
        }
    }
}

/// How to render a conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderOptions {
    /// Append the header that opens a new assistant turn.
    pub add_generation_prompt: bool,
    /// End the prompt inside the final (assistant) message so the model continues it.
    pub continue_final_message: bool,
    /// Tool definitions (OpenAI `tools`), passed to the template as `tools`.
    pub tools: Option<Json>,
    /// `chat_template_kwargs`: extra template variables such as `enable_thinking`.
    pub extra: Map<String, Json>,
}

/// Converts a message to the dict transformers hands to templates: keys whose value is
/// missing are left out (templates test `'content' in message` or `message.content is
/// defined`), and multi-part content stays a list of `{"type": "text", "text": ...}` dicts.
pub(crate) fn to_template_json(message: &ChatMessage) -> Result<Json> {
    let mut map = Map::new();
    map.insert("role".into(), Json::String(message.role.clone()));
    match &message.content {
        None => {}
        Some(MessageContent::Text(text)) => {
            map.insert("content".into(), Json::String(text.clone()));
        }
        Some(MessageContent::Parts(parts)) => {
            let parts = parts.iter().map(part_to_json).collect::<Result<Vec<_>>>()?;
            map.insert("content".into(), Json::Array(parts));
        }
    }
    if let Some(name) = &message.name {
        map.insert("name".into(), Json::String(name.clone()));
    }
    if let Some(calls) = &message.tool_calls {
        map.insert("tool_calls".into(), parse_arguments(calls.clone()));
    }
    if let Some(id) = &message.tool_call_id {
        map.insert("tool_call_id".into(), Json::String(id.clone()));
    }
    Ok(Json::Object(map))
}

fn part_to_json(part: &ContentPart) -> Result<Json> {
    match (&*part.kind, &part.text) {
        ("text", Some(text)) => {
            let mut map = Map::new();
            map.insert("type".into(), Json::String("text".into()));
            map.insert("text".into(), Json::String(text.clone()));
            Ok(Json::Object(map))
        }
        ("text", None) => Err(TextError::Template("a \"text\" content part has no \"text\" field".into())),
        (kind, _) => Err(TextError::Template(format!(
            "content parts of type \"{kind}\" are not supported by chat templates; only \"text\" parts are"
        ))),
    }
}

/// OpenAI clients send `function.arguments` as a JSON string, but templates expect a dict
/// (they `tojson` it or iterate its items), so a string holding a JSON object is parsed.
/// Anything else is passed on untouched.
fn parse_arguments(mut calls: Json) -> Json {
    if let Some(calls) = calls.as_array_mut() {
        for call in calls {
            let Some(function) = call.get_mut("function").and_then(Json::as_object_mut) else {
                continue;
            };
            let parsed = match function.get("arguments") {
                Some(Json::String(s)) => {
                    serde_json::from_str::<Json>(s).ok().filter(Json::is_object)
                }
                _ => None,
            };
            if let Some(parsed) = parsed {
                function.insert("arguments".into(), parsed);
            }
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_deserialize_from_the_openai_wire_format() {
        let m: ChatMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}"#,
        )
        .unwrap();
        assert_eq!(
            m.content,
            Some(MessageContent::Parts(vec![
                ContentPart::text("hi"),
                ContentPart {
                    kind: "image_url".into(),
                    text: None
                }
            ]))
        );
        let m: ChatMessage =
            serde_json::from_str(r#"{"role":"assistant","content":null}"#).unwrap();
        assert_eq!(m.content, None);
    }

    #[test]
    fn missing_fields_are_left_out_of_the_template_dict() {
        let m: ChatMessage =
            serde_json::from_str(r#"{"role":"assistant","content":null}"#).unwrap();
        assert_eq!(
            to_template_json(&m).unwrap(),
            serde_json::json!({"role": "assistant"})
        );
    }

    #[test]
    fn string_tool_call_arguments_become_objects() {
        let m: ChatMessage = serde_json::from_str(
            r#"{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]}"#,
        )
        .unwrap();
        let json = to_template_json(&m).unwrap();
        assert_eq!(
            json["tool_calls"][0]["function"]["arguments"],
            serde_json::json!({"x": 1})
        );
    }

    #[test]
    fn non_text_parts_are_refused_by_type() {
        let m = ChatMessage {
            content: Some(MessageContent::Parts(vec![ContentPart {
                kind: "input_audio".into(),
                text: None,
            }])),
            ..ChatMessage::text("user", "")
        };
        let err = to_template_json(&m).unwrap_err().to_string();
        assert!(err.contains("\"input_audio\""), "{err}");
    }
}
