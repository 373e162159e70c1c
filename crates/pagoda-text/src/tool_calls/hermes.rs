//! `<tool_call>{json}</tool_call>` blocks among ordinary text.

use super::json_call;
use super::ToolEvent;
use crate::reasoning::partial_suffix;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

#[derive(Debug, Clone, Default)]
pub struct HermesParser {
    held: String,
    inside: bool,
    /// A call came out: white space after it is held, and dropped if only calls follow.
    after_call: bool,
}

impl HermesParser {
    pub fn push(&mut self, text: &str, out: &mut Vec<ToolEvent>) {
        self.held.push_str(text);
        loop {
            if self.inside {
                let Some(end) = self.held.find(CLOSE) else {
                    return;
                };
                let body = self.held[..end].to_string();
                self.held.drain(..end + CLOSE.len());
                self.inside = false;
                self.emit_call(&body, true, out);
                continue;
            }
            if let Some(start) = self.held.find(OPEN) {
                let before: String = self.held.drain(..start + OPEN.len()).collect();
                self.content(&before[..start], out);
                self.inside = true;
                continue;
            }
            let keep = partial_suffix(&self.held, OPEN);
            let cut = self.held.len() - keep;
            if self.after_call && self.held[..cut].trim().is_empty() {
                return;
            }
            let text: String = self.held.drain(..cut).collect();
            self.content(&text, out);
            return;
        }
    }

    pub fn finish(&mut self, out: &mut Vec<ToolEvent>) {
        let held = std::mem::take(&mut self.held);
        if self.inside {
            // Stopped before the closing tag (an end-of-sequence token right after the JSON).
            self.inside = false;
            self.emit_call(&held, false, out);
        } else if !(self.after_call && held.trim().is_empty()) {
            self.content(&held, out);
        }
    }

    fn content(&mut self, text: &str, out: &mut Vec<ToolEvent>) {
        if self.after_call && text.trim().is_empty() {
            return;
        }
        self.after_call = false;
        out.push(ToolEvent::Content(text.to_string()));
    }

    fn emit_call(&mut self, body: &str, closed: bool, out: &mut Vec<ToolEvent>) {
        match json_call::from_text(body) {
            Some(call) => {
                out.push(ToolEvent::Call(call));
                self.after_call = true;
            }
            None => {
                let close = if closed { CLOSE } else { "" };
                self.content(&format!("{OPEN}{body}{close}"), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tool_calls::testing::{call, parse_all};
    use crate::tool_calls::ToolCallFormat::Hermes;

    #[test]
    fn calls_between_text() {
        let out = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        assert_eq!(
            parse_all(Hermes, out),
            (
                "Let me check.\n".into(),
                vec![
                    call("get_weather", r#"{"city":"Paris"}"#),
                    call("get_time", "{}")
                ]
            )
        );
    }

    #[test]
    fn an_unclosed_last_call_and_string_arguments_parse() {
        let out = "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}";
        assert_eq!(
            parse_all(Hermes, out),
            (String::new(), vec![call("f", r#"{"x":1}"#)])
        );
    }

    #[test]
    fn malformed_calls_stay_content() {
        let out = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": </tool_call> tail";
        assert_eq!(parse_all(Hermes, out), (out.to_string(), vec![]));
        let no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
        assert_eq!(parse_all(Hermes, no_name), (no_name.to_string(), vec![]));
        assert_eq!(
            parse_all(Hermes, "a <tool_ b"),
            ("a <tool_ b".into(), vec![])
        );
    }
}
