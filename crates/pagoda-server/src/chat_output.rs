//! A chat choice's output as the client sees it: the thinking (`reasoning_content`), the
//! answer (`content`) and the tool calls (`tool_calls`), split as the text streams in.
//!
//! Every call is checked before it goes out: it must name a function the request offered and
//! the tenant's scope allows, with arguments inside the scope's narrowed schema. A call that
//! fails is never returned (neither as a call nor as text) and is counted for the audit log.

use std::collections::BTreeMap;
use std::sync::Arc;

use pagoda_text::reasoning::{ReasoningFormat, ReasoningSplitter};
use pagoda_text::tool_calls::{ToolCall, ToolCallFormat, ToolCallParser, ToolEvent};
use serde_json::Value;

use crate::ids::new_id;
use crate::tools::{ToolChoice, ToolRequest, ToolScope};

/// The server's tool-call and reasoning parsers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChatFeatures {
    pub tool_parser: ToolParser,
    pub reasoning: Option<ReasoningFormat>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolParser {
    /// From the chat template's markers.
    #[default]
    Detect,
    Off,
    Format(ToolCallFormat),
}

impl ChatFeatures {
    /// The tool-call format of a model whose chat template is `template`.
    pub fn tool_format(&self, template: Option<&str>) -> Option<ToolCallFormat> {
        match self.tool_parser {
            ToolParser::Detect => template.and_then(ToolCallFormat::detect),
            ToolParser::Off => None,
            ToolParser::Format(format) => Some(format),
        }
    }
}

/// One piece of a choice's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Reasoning(String),
    Content(String),
    Call(IssuedCall),
}

/// A checked call with its place among the choice's calls and its id.
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedCall {
    pub index: usize,
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// How a request's choices are split; shared by its choices.
#[derive(Clone)]
pub struct OutputPlan {
    reasoning: Option<ReasoningSplitter>,
    tools: Option<Arc<ToolPlan>>,
}

struct ToolPlan {
    mode: ToolMode,
    parallel: bool,
    offered: Vec<String>,
    scope: ToolScope,
    /// Per function with a narrowed schema, its validator (`None`: the schema does not
    /// compile, and every call to the function is refused).
    narrowed: BTreeMap<String, Option<jsonschema::Validator>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolMode {
    /// The model's own format, parsed.
    Parse(ToolCallFormat),
    /// Constrained to `[{"name", "parameters"}, ...]`.
    Required,
    /// Constrained to the named function's arguments.
    Named,
}

impl OutputPlan {
    /// `prompt` is the rendered prompt (where the thinking starts); `format` the model's
    /// tool-call format, if known (without one, `auto` calls are not parsed).
    pub fn new(
        reasoning: Option<ReasoningFormat>,
        prompt: &str,
        tools: Option<&ToolRequest>,
        format: Option<ToolCallFormat>,
        scope: &ToolScope,
    ) -> OutputPlan {
        let tools = tools.and_then(|t| {
            let mode = match &t.choice {
                ToolChoice::None => return None,
                ToolChoice::Auto => ToolMode::Parse(format?),
                ToolChoice::Required => ToolMode::Required,
                ToolChoice::Named(_) => ToolMode::Named,
            };
            let offered = match &t.choice {
                ToolChoice::Named(name) => vec![name.clone()],
                _ => t.functions.iter().map(|f| f.name.clone()).collect(),
            };
            let narrowed = offered
                .iter()
                .filter_map(|name| {
                    let schema = scope.narrowed.get(name)?;
                    let validator = jsonschema::validator_for(schema)
                        .inspect_err(|e| {
                            tracing::error!(function = %name, error = %e, "the tool scope's argument schema does not compile; calls to it are refused")
                        })
                        .ok();
                    Some((name.clone(), validator))
                })
                .collect();
            Some(Arc::new(ToolPlan {
                mode,
                parallel: t.parallel,
                offered,
                scope: scope.clone(),
                narrowed,
            }))
        });
        OutputPlan {
            reasoning: reasoning.map(|f| ReasoningSplitter::new(f, prompt)),
            tools,
        }
    }

    pub fn parser(&self) -> ChoiceParser {
        let tools = self.tools.as_ref().map(|plan| ToolStage {
            parser: match plan.mode {
                ToolMode::Parse(format) => Some(ToolCallParser::new(format)),
                ToolMode::Required | ToolMode::Named => None,
            },
            buffered: String::new(),
            plan: plan.clone(),
        });
        ChoiceParser {
            splitter: self.reasoning.clone(),
            tools,
            calls: 0,
            refused: Vec::new(),
        }
    }
}

struct ToolStage {
    plan: Arc<ToolPlan>,
    parser: Option<ToolCallParser>,
    /// The constrained output, parsed at the end.
    buffered: String,
}

/// One choice's splitter.
pub struct ChoiceParser {
    splitter: Option<ReasoningSplitter>,
    tools: Option<ToolStage>,
    calls: usize,
    refused: Vec<String>,
}

impl ChoiceParser {
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        let (reasoning, content) = match self.splitter.as_mut() {
            Some(s) => {
                let split = s.push(text);
                (split.reasoning, split.content)
            }
            None => (String::new(), text.to_string()),
        };
        let mut out = Vec::new();
        if !reasoning.is_empty() {
            out.push(Piece::Reasoning(reasoning));
        }
        self.content(&content, false, &mut out);
        out
    }

    pub fn finish(&mut self) -> Vec<Piece> {
        let (reasoning, content) = match self.splitter.as_mut() {
            Some(s) => {
                let split = s.finish();
                (split.reasoning, split.content)
            }
            None => (String::new(), String::new()),
        };
        let mut out = Vec::new();
        if !reasoning.is_empty() {
            out.push(Piece::Reasoning(reasoning));
        }
        self.content(&content, true, &mut out);
        out
    }

    /// Names of the calls refused so far (for the audit log).
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    fn content(&mut self, text: &str, last: bool, out: &mut Vec<Piece>) {
        let Some(stage) = self.tools.as_mut() else {
            if !text.is_empty() {
                out.push(Piece::Content(text.to_string()));
            }
            return;
        };
        let mut events = Vec::new();
        match stage.parser.as_mut() {
            Some(parser) => {
                events.extend(parser.push(text));
                if last {
                    events.extend(parser.finish());
                }
            }
            None => {
                stage.buffered.push_str(text);
                if last {
                    let plan = stage.plan.clone();
                    events.extend(constrained_calls(
                        &plan,
                        &std::mem::take(&mut stage.buffered),
                    ));
                }
            }
        }
        for event in events {
            match event {
                ToolEvent::Content(text) if !text.is_empty() => out.push(Piece::Content(text)),
                ToolEvent::Content(_) => {}
                ToolEvent::Call(call) => {
                    let plan = self.tools.as_ref().map(|s| s.plan.clone());
                    if let Some(plan) = plan {
                        self.issue(&plan, call, out);
                    }
                }
            }
        }
    }

    fn issue(&mut self, plan: &ToolPlan, call: ToolCall, out: &mut Vec<Piece>) {
        if !plan.parallel && self.calls > 0 {
            return;
        }
        if let Err(why) = plan.check(&call) {
            tracing::warn!(function = %call.name, %why, "tool call refused");
            self.refused.push(call.name);
            return;
        }
        out.push(Piece::Call(IssuedCall {
            index: self.calls,
            id: new_id("call"),
            name: call.name,
            arguments: call.arguments,
        }));
        self.calls += 1;
    }
}

impl ToolPlan {
    fn check(&self, call: &ToolCall) -> Result<(), &'static str> {
        if !self.offered.contains(&call.name) {
            return Err("the request did not offer this function");
        }
        if !self.scope.allows(&call.name) {
            return Err("the tenant's tool scope does not allow this function");
        }
        if let Some(validator) = self.narrowed.get(&call.name) {
            let arguments: Value =
                serde_json::from_str(&call.arguments).map_err(|_| "the arguments are not JSON")?;
            if !validator.as_ref().is_some_and(|v| v.is_valid(&arguments)) {
                return Err("the arguments are outside the tenant's narrowed schema");
            }
        }
        Ok(())
    }
}

/// The calls of a constrained output (`required`: a JSON list; a named function: its
/// arguments); text that does not parse (cut off by `max_tokens`) stays content.
fn constrained_calls(plan: &ToolPlan, text: &str) -> Vec<ToolEvent> {
    let parsed: Option<Vec<ToolCall>> = match plan.mode {
        ToolMode::Named => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .map(|arguments| {
                vec![ToolCall {
                    name: plan.offered[0].clone(),
                    arguments: arguments.to_string(),
                }]
            }),
        _ => serde_json::from_str::<Vec<Value>>(text)
            .ok()
            .and_then(|list| {
                list.iter()
                    .map(pagoda_text::tool_calls::call_from_value)
                    .collect()
            }),
    };
    match parsed {
        Some(calls) => calls.into_iter().map(ToolEvent::Call).collect(),
        None => vec![ToolEvent::Content(text.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(choice: Value, parallel: bool) -> ToolRequest {
        ToolRequest::read(&json!({
            "tools": [
                {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
                {"type": "function", "function": {"name": "fetch_url", "parameters": {"type": "object"}}}
            ],
            "tool_choice": choice,
            "parallel_tool_calls": parallel,
        }))
        .unwrap()
        .unwrap()
    }

    fn run(plan: &OutputPlan, pieces: &[&str]) -> (Vec<Piece>, Vec<String>) {
        let mut parser = plan.parser();
        let mut out: Vec<Piece> = pieces.iter().flat_map(|p| parser.push(p)).collect();
        out.extend(parser.finish());
        (out, parser.refused().to_vec())
    }

    fn calls(pieces: &[Piece]) -> Vec<(String, String)> {
        pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Call(c) => Some((c.name.clone(), c.arguments.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn thinking_then_calls_in_the_models_format() {
        let r = request(json!("auto"), true);
        let plan = OutputPlan::new(
            Some(ReasoningFormat::Qwen3),
            "",
            Some(&r),
            Some(ToolCallFormat::Hermes),
            &ToolScope::default(),
        );
        let (out, refused) = run(&plan, &["<think>need weather", "</think>\n\nOk.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"]);
        assert_eq!(out[0], Piece::Reasoning("need weather".into()));
        assert!(out.contains(&Piece::Content("Ok.".into())));
        assert_eq!(
            calls(&out),
            [("get_weather".to_string(), r#"{"city":"Oslo"}"#.to_string())]
        );
        assert!(refused.is_empty());
    }

    #[test]
    fn out_of_scope_unoffered_and_out_of_range_calls_are_refused() {
        let r = request(json!("auto"), true);
        let scope = ToolScope {
            allowed: Some(vec!["get_*".into(), "fetch_url".into()]),
            narrowed: BTreeMap::from([(
                "fetch_url".to_string(),
                json!({"properties": {"url": {"pattern": "^https://ok\\.example/"}}}),
            )]),
        };
        let plan = OutputPlan::new(None, "", Some(&r), Some(ToolCallFormat::Hermes), &scope);
        let output = [
            "<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>",
            "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://evil.example/x\"}}</tool_call>",
            "<tool_call>{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://ok.example/x\"}}</tool_call>",
        ];
        let (out, refused) = run(&plan, &output);
        assert_eq!(
            calls(&out),
            [(
                "fetch_url".to_string(),
                r#"{"url":"https://ok.example/x"}"#.to_string()
            )]
        );
        assert_eq!(refused, ["delete_all", "fetch_url"]);
        assert!(!out.iter().any(
            |p| matches!(p, Piece::Content(t) if t.contains("delete_all") || t.contains("evil"))
        ));
        // Scope narrowing the offer itself: a tool the scope drops is refused even if offered.
        let narrow = ToolScope {
            allowed: Some(vec!["get_weather".into()]),
            ..ToolScope::default()
        };
        let plan = OutputPlan::new(None, "", Some(&r), Some(ToolCallFormat::Hermes), &narrow);
        assert_eq!(run(&plan, &[output[2]]).1, ["fetch_url"]);
    }

    #[test]
    fn constrained_outputs_become_calls_and_parallel_false_keeps_one() {
        let r = request(json!("required"), false);
        let plan = OutputPlan::new(None, "", Some(&r), None, &ToolScope::default());
        let (out, _) = run(
            &plan,
            &[
                "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"A\"}},",
                " {\"name\": \"fetch_url\", \"parameters\": {}}]",
            ],
        );
        assert_eq!(
            calls(&out),
            [("get_weather".to_string(), r#"{"city":"A"}"#.to_string())]
        );
        let named = request(
            json!({"type": "function", "function": {"name": "fetch_url"}}),
            true,
        );
        let plan = OutputPlan::new(None, "", Some(&named), None, &ToolScope::default());
        let (out, _) = run(&plan, &["{\"url\": ", "\"x\"}"]);
        assert_eq!(
            calls(&out),
            [("fetch_url".to_string(), r#"{"url":"x"}"#.to_string())]
        );
        // Cut off before the JSON closed: the text stays content.
        let (out, _) = run(&plan, &["{\"url\": "]);
        assert_eq!(out, [Piece::Content("{\"url\": ".into())]);
    }

    #[test]
    fn the_format_is_detected_from_real_chat_templates() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/chat_templates/templates/"
        );
        let detect = ChatFeatures::default();
        for (file, format) in [
            (
                "Qwen-Qwen2.5-7B-Instruct.jinja",
                Some(ToolCallFormat::Hermes),
            ),
            ("Qwen-Qwen3-0.6B.jinja", Some(ToolCallFormat::Hermes)),
            (
                "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
                Some(ToolCallFormat::Hermes),
            ),
            (
                "meta-llama-Llama-3.1-8B-Instruct.jinja",
                Some(ToolCallFormat::Llama3Json),
            ),
            (
                "meta-llama-Llama-3.2-3B-Instruct.jinja",
                Some(ToolCallFormat::Llama3Json),
            ),
            (
                "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                Some(ToolCallFormat::Mistral),
            ),
            (
                "Mistral-Small-3.2-24B-Instruct-2506.jinja",
                Some(ToolCallFormat::Mistral),
            ),
        ] {
            let source = std::fs::read_to_string(format!("{dir}{file}")).unwrap();
            assert_eq!(detect.tool_format(Some(&source)), format, "{file}");
        }
        let off = ChatFeatures {
            tool_parser: ToolParser::Off,
            reasoning: None,
        };
        assert_eq!(off.tool_format(Some("<tool_call>")), None);
    }

    #[test]
    fn tool_choice_none_or_no_format_is_plain_content() {
        let text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
        let none = request(json!("none"), true);
        let plan = OutputPlan::new(
            None,
            "",
            Some(&none),
            Some(ToolCallFormat::Hermes),
            &ToolScope::default(),
        );
        assert_eq!(run(&plan, &[text]).0, [Piece::Content(text.into())]);
        let auto = request(json!("auto"), true);
        let plan = OutputPlan::new(None, "", Some(&auto), None, &ToolScope::default());
        assert_eq!(run(&plan, &[text]).0, [Piece::Content(text.into())]);
    }
}
