//! Mistral: `[TOOL_CALLS]` then `[{"name", "arguments"}, ...]`, or `name[ARGS]{...}` per call
//! (tokenizers v11 and later).

use super::json_call::{self, ToolCall};
use super::ToolEvent;
use crate::reasoning::partial_suffix;

const MARKER: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";

#[derive(Debug, Clone, Default)]
pub struct MistralParser {
    held: String,
    inside: bool,
}

impl MistralParser {
    pub fn push(&mut self, text: &str, out: &mut Vec<ToolEvent>) {
        self.held.push_str(text);
        if self.inside {
            return;
        }
        if let Some(start) = self.held.find(MARKER) {
            let before: String = self.held.drain(..start).collect();
            out.push(ToolEvent::Content(before));
            self.inside = true;
            return;
        }
        let cut = self.held.len() - partial_suffix(&self.held, MARKER);
        out.push(ToolEvent::Content(self.held.drain(..cut).collect()));
    }

    pub fn finish(&mut self, out: &mut Vec<ToolEvent>) {
        let held = std::mem::take(&mut self.held);
        if !self.inside {
            out.push(ToolEvent::Content(held));
            return;
        }
        match parse_calls(&held) {
            Some(calls) => out.extend(calls.into_iter().map(ToolEvent::Call)),
            None => out.push(ToolEvent::Content(held)),
        }
    }
}

/// Everything from the first `[TOOL_CALLS]` on: all calls, or none.
fn parse_calls(text: &str) -> Option<Vec<ToolCall>> {
    let body = text.strip_prefix(MARKER)?.trim();
    if body.starts_with('[') {
        let list: Vec<serde_json::Value> = serde_json::from_str(body).ok()?;
        let calls: Option<Vec<ToolCall>> = list.iter().map(json_call::from_value).collect();
        return calls.filter(|c| !c.is_empty());
    }
    let calls: Option<Vec<ToolCall>> = body
        .split(MARKER)
        .map(|piece| {
            let (name, arguments) = piece.split_once(ARGS)?;
            let value = serde_json::json!({
                "name": name.trim(),
                "arguments": serde_json::from_str::<serde_json::Value>(arguments.trim()).ok()?,
            });
            json_call::from_value(&value)
        })
        .collect();
    calls.filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use crate::tool_calls::testing::{call, parse_all};
    use crate::tool_calls::ToolCallFormat::Mistral;

    #[test]
    fn both_mistral_formats() {
        assert_eq!(
            parse_all(Mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]"),
            (String::new(), vec![call("a", r#"{"x":1}"#), call("b", "{}")])
        );
        assert_eq!(
            parse_all(
                Mistral,
                "Sure. [TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{}"
            ),
            (
                "Sure. ".into(),
                vec![call("a", r#"{"x":1}"#), call("b", "{}")]
            )
        );
    }

    #[test]
    fn malformed_calls_stay_content() {
        let out = "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": ";
        assert_eq!(parse_all(Mistral, out), (out.into(), vec![]));
        assert_eq!(
            parse_all(Mistral, "plain [TOOL"),
            ("plain [TOOL".into(), vec![])
        );
    }
}
