//! Tool calls in a model's output, in the formats current model families were trained on,
//! parsed as the text streams in: text outside calls streams on as content, each call comes
//! out whole once it is complete. A call that does not parse stays content (nothing is lost).
//!
//! - Hermes (Qwen2.5, Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
//!   one block per call.
//! - Llama 3.x JSON: the whole output is `{"name": ..., "parameters": {...}}`, calls separated by
//!   `;`, maybe after `<|python_tag|>`.
//! - Mistral: `[TOOL_CALLS]` then a JSON list of calls, or (newer tokenizers) `name[ARGS]{...}`
//!   per call.

mod hermes;
mod json_call;
mod llama3;
mod mistral;

pub use json_call::{from_value as call_from_value, ToolCall};

/// Which format the model writes its calls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    Hermes,
    Llama3Json,
    Mistral,
}

impl ToolCallFormat {
    pub fn parse(name: &str) -> Option<ToolCallFormat> {
        match name {
            "hermes" | "qwen" | "qwen2.5" | "qwen3" => Some(ToolCallFormat::Hermes),
            "llama3_json" | "llama3" | "llama" => Some(ToolCallFormat::Llama3Json),
            "mistral" => Some(ToolCallFormat::Mistral),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::Llama3Json => "llama3_json",
            ToolCallFormat::Mistral => "mistral",
        }
    }

    /// The format a chat template teaches, from the markers it writes.
    pub fn detect(template: &str) -> Option<ToolCallFormat> {
        if template.contains("<tool_call>") {
            Some(ToolCallFormat::Hermes)
        } else if template.contains("[TOOL_CALLS]") {
            Some(ToolCallFormat::Mistral)
        } else if template.contains("<|python_tag|>")
            || (template.contains("ipython") && template.contains("parameters"))
        {
            Some(ToolCallFormat::Llama3Json)
        } else {
            None
        }
    }

    /// Whether its markers are special tokens that decoding must keep.
    pub fn needs_special_tokens(self) -> bool {
        self == ToolCallFormat::Mistral
    }
}

/// A piece of parsed output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolEvent {
    Content(String),
    Call(ToolCall),
}

/// One output's parser.
#[derive(Debug, Clone)]
pub enum ToolCallParser {
    Hermes(hermes::HermesParser),
    Llama3(llama3::Llama3Parser),
    Mistral(mistral::MistralParser),
}

impl ToolCallParser {
    pub fn new(format: ToolCallFormat) -> ToolCallParser {
        match format {
            ToolCallFormat::Hermes => ToolCallParser::Hermes(Default::default()),
            ToolCallFormat::Llama3Json => ToolCallParser::Llama3(Default::default()),
            ToolCallFormat::Mistral => ToolCallParser::Mistral(Default::default()),
        }
    }

    pub fn push(&mut self, text: &str) -> Vec<ToolEvent> {
        let mut out = Vec::new();
        match self {
            ToolCallParser::Hermes(p) => p.push(text, &mut out),
            ToolCallParser::Llama3(p) => p.push(text, &mut out),
            ToolCallParser::Mistral(p) => p.push(text, &mut out),
        }
        merge_content(out)
    }

    pub fn finish(&mut self) -> Vec<ToolEvent> {
        let mut out = Vec::new();
        match self {
            ToolCallParser::Hermes(p) => p.finish(&mut out),
            ToolCallParser::Llama3(p) => p.finish(&mut out),
            ToolCallParser::Mistral(p) => p.finish(&mut out),
        }
        merge_content(out)
    }
}

/// Joins neighbouring content pieces and drops empty ones.
fn merge_content(events: Vec<ToolEvent>) -> Vec<ToolEvent> {
    let mut out: Vec<ToolEvent> = Vec::with_capacity(events.len());
    for event in events {
        match (out.last_mut(), event) {
            (_, ToolEvent::Content(text)) if text.is_empty() => {}
            (Some(ToolEvent::Content(last)), ToolEvent::Content(text)) => last.push_str(&text),
            (_, event) => out.push(event),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// Parses `output` in one piece and in pieces of every size up to 7; every way must give
    /// the same calls and content.
    pub fn parse_all(format: ToolCallFormat, output: &str) -> (String, Vec<ToolCall>) {
        let mut results = Vec::new();
        for size in [usize::MAX, 1, 2, 3, 5, 7] {
            let mut parser = ToolCallParser::new(format);
            let mut events = Vec::new();
            let chars: Vec<char> = output.chars().collect();
            for piece in chars.chunks(size.min(chars.len().max(1))) {
                events.extend(parser.push(&piece.iter().collect::<String>()));
            }
            events.extend(parser.finish());
            let mut content = String::new();
            let mut calls = Vec::new();
            for e in events {
                match e {
                    ToolEvent::Content(t) => content.push_str(&t),
                    ToolEvent::Call(c) => calls.push(c),
                }
            }
            results.push((content, calls));
        }
        for r in &results[1..] {
            assert_eq!(r, &results[0], "pieces disagree for {output:?}");
        }
        results.remove(0)
    }

    pub fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}
