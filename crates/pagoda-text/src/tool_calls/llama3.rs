//! Llama 3.x: the whole output is one or more JSON calls (`;`-separated), or plain text.

use super::json_call;
use super::ToolEvent;

const PYTHON_TAG: &str = "<|python_tag|>";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Mode {
    #[default]
    Undecided,
    Calls,
    Text,
}

#[derive(Debug, Clone, Default)]
pub struct Llama3Parser {
    mode: Mode,
    held: String,
}

impl Llama3Parser {
    pub fn push(&mut self, text: &str, out: &mut Vec<ToolEvent>) {
        self.held.push_str(text);
        if self.mode == Mode::Undecided {
            let start = self.held.trim_start();
            if start.starts_with('{') || start.starts_with(PYTHON_TAG) {
                self.mode = Mode::Calls;
            } else if start.is_empty() || PYTHON_TAG.starts_with(start) {
                return;
            } else {
                self.mode = Mode::Text;
            }
        }
        if self.mode == Mode::Text {
            out.push(ToolEvent::Content(std::mem::take(&mut self.held)));
        }
    }

    pub fn finish(&mut self, out: &mut Vec<ToolEvent>) {
        let held = std::mem::take(&mut self.held);
        if self.mode != Mode::Calls {
            out.push(ToolEvent::Content(held));
            return;
        }
        match parse_calls(held.trim_start().trim_start_matches(PYTHON_TAG)) {
            Some(calls) => out.extend(calls.into_iter().map(ToolEvent::Call)),
            None => out.push(ToolEvent::Content(held)),
        }
    }
}

/// `{...}; {...}`: every piece a call, or none.
fn parse_calls(text: &str) -> Option<Vec<json_call::ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        let value = stream.next()?.ok()?;
        calls.push(json_call::from_value(&value)?);
        rest = rest[stream.byte_offset()..].trim_start();
        rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use crate::tool_calls::testing::{call, parse_all};
    use crate::tool_calls::ToolCallFormat::Llama3Json;

    #[test]
    fn one_or_more_json_calls() {
        assert_eq!(
            parse_all(
                Llama3Json,
                "{\"name\": \"search\", \"parameters\": {\"q\": \"rust\"}}"
            ),
            (String::new(), vec![call("search", r#"{"q":"rust"}"#)])
        );
        assert_eq!(
            parse_all(Llama3Json, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"n\": 2}}"),
            (String::new(), vec![call("a", "{}"), call("b", r#"{"n":2}"#)])
        );
    }

    #[test]
    fn text_and_malformed_json_stay_content() {
        assert_eq!(
            parse_all(Llama3Json, "Hello {there}"),
            ("Hello {there}".into(), vec![])
        );
        let broken = "{\"name\": \"a\", \"parameters\": {\"x\": 1}";
        assert_eq!(parse_all(Llama3Json, broken), (broken.into(), vec![]));
        let not_a_call = "{\"answer\": 42}";
        assert_eq!(
            parse_all(Llama3Json, not_a_call),
            (not_a_call.into(), vec![])
        );
    }
}
