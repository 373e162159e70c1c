//! A chat request's tools: the functions it offers (`tools`), how the model may use them
//! (`tool_choice`, `parallel_tool_calls`), and the tenant's tool scope, which may forbid a
//! function outright or narrow its arguments.
//!
//! With `tool_choice` `required` or a named function, decoding is constrained (as vLLM does,
//! whatever the model's own format): to a JSON list of `{"name", "parameters"}` calls, or to
//! the named function's arguments. The scope's narrowed schema is part of that constraint.

use std::collections::BTreeMap;

use pagoda_runtime::ConstraintSpec;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::gateway::Caller;
use crate::state::AppState;

/// Most functions one request may offer.
pub const MAX_TOOLS: usize = 128;
/// Longest function name (OpenAI's limit).
const MAX_NAME_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub name: String,
    /// Its parameters' JSON schema.
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Named(String),
}

/// What a request asks of tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    pub functions: Vec<FunctionSpec>,
    pub choice: ToolChoice,
    pub parallel: bool,
}

/// What a tenant may do with tools.
#[derive(Debug, Clone, Default)]
pub struct ToolScope {
    /// Name patterns; `None`: any function.
    pub allowed: Option<Vec<String>>,
    /// Schemas narrowing some functions' arguments.
    pub narrowed: BTreeMap<String, Value>,
}

impl ToolRequest {
    /// `tools`, `tool_choice` and `parallel_tool_calls` of a chat body; `None` without tools.
    pub fn read(body: &Value) -> Result<Option<ToolRequest>, ApiError> {
        let choice = match body.get("tool_choice").filter(|v| !v.is_null()) {
            None => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "none" => ToolChoice::None,
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                other => {
                    return Err(ApiError::invalid(
                        "tool_choice",
                        format!(
                            "`tool_choice` `{other}` is not none, auto, required or a function"
                        ),
                    ))
                }
            }),
            Some(object) => {
                let name = object
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .filter(|_| object.get("type").and_then(Value::as_str) == Some("function"))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            "tool_choice",
                            "a named `tool_choice` is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                        )
                    })?;
                Some(ToolChoice::Named(name.to_string()))
            }
        };
        let functions = match body.get("tools").filter(|v| !v.is_null()) {
            None => Vec::new(),
            Some(Value::Array(tools)) => functions(tools)?,
            Some(_) => return Err(ApiError::invalid("tools", "`tools` must be a list")),
        };
        if functions.is_empty() {
            return match choice {
                Some(ToolChoice::Required | ToolChoice::Named(_)) => Err(ApiError::invalid(
                    "tool_choice",
                    "`tool_choice` asks for a tool call but the request offers no `tools`",
                )),
                _ => Ok(None),
            };
        }
        if let Some(ToolChoice::Named(name)) = &choice {
            if !functions.iter().any(|f| &f.name == name) {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!("`tool_choice` names `{name}`, which is not in `tools`"),
                ));
            }
        }
        let parallel = match body.get("parallel_tool_calls").filter(|v| !v.is_null()) {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiError::invalid(
                    "parallel_tool_calls",
                    "`parallel_tool_calls` must be a boolean",
                ))
            }
        };
        Ok(Some(ToolRequest {
            functions,
            choice: choice.unwrap_or(ToolChoice::Auto),
            parallel,
        }))
    }

    /// 403 for the first offered function the scope does not allow.
    pub fn check_scope(&self, scope: &ToolScope) -> Result<(), ApiError> {
        match self.functions.iter().find(|f| !scope.allows(&f.name)) {
            Some(f) => Err(ApiError::ToolForbidden(f.name.clone())),
            None => Ok(()),
        }
    }

    /// The output constraint `tool_choice` asks for, with the scope's narrowing.
    pub fn constraint(&self, scope: &ToolScope) -> Option<ConstraintSpec> {
        let arguments = |f: &FunctionSpec| match scope.narrowed.get(&f.name) {
            Some(narrow) => json!({"allOf": [f.parameters, narrow]}),
            None => f.parameters.clone(),
        };
        match &self.choice {
            ToolChoice::None | ToolChoice::Auto => None,
            ToolChoice::Named(name) => {
                let f = self.functions.iter().find(|f| &f.name == name)?;
                Some(ConstraintSpec::JsonSchema(arguments(f)))
            }
            ToolChoice::Required => {
                let calls: Vec<Value> = self
                    .functions
                    .iter()
                    .map(|f| {
                        json!({
                            "type": "object",
                            "properties": {
                                "name": {"const": f.name},
                                "parameters": arguments(f),
                            },
                            "required": ["name", "parameters"],
                            "additionalProperties": false,
                        })
                    })
                    .collect();
                let mut list = json!({
                    "type": "array",
                    "items": {"anyOf": calls},
                    "minItems": 1,
                    // Our own format, not the model's: no room for runs of white space.
                    "x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "},
                });
                if !self.parallel {
                    list["maxItems"] = json!(1);
                }
                Some(ConstraintSpec::JsonSchema(list))
            }
        }
    }
}

impl ToolScope {
    /// The caller's scope from the gateway policy; everything without a gateway.
    pub fn of(state: &AppState, caller: Option<&Caller>) -> ToolScope {
        let (Some(gateway), Some(caller)) = (state.gateway(), caller) else {
            return ToolScope::default();
        };
        let policy = gateway.policy();
        let tenant = policy.tenant(&caller.tenant);
        ToolScope {
            allowed: tenant.tools.clone(),
            narrowed: tenant.tool_arguments.clone(),
        }
    }

    pub fn allows(&self, name: &str) -> bool {
        pagoda_gateway::allows_tool(self.allowed.as_deref(), name)
    }
}

fn functions(tools: &[Value]) -> Result<Vec<FunctionSpec>, ApiError> {
    if tools.len() > MAX_TOOLS {
        return Err(ApiError::invalid(
            "tools",
            format!("at most {MAX_TOOLS} tools are allowed, got {}", tools.len()),
        ));
    }
    let mut out: Vec<FunctionSpec> = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::invalid(
                &format!("{param}.type"),
                "only `function` tools are supported",
            ));
        }
        let name = tool
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(ApiError::invalid(
                &format!("{param}.function.name"),
                format!("a function name is 1 to {MAX_NAME_LEN} of a-z, A-Z, 0-9, _, - and ."),
            ));
        }
        if out.iter().any(|f| f.name == name) {
            return Err(ApiError::invalid(
                &format!("{param}.function.name"),
                format!("function `{name}` is offered twice"),
            ));
        }
        let parameters = match tool.pointer("/function/parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => {
                return Err(ApiError::invalid(
                    &format!("{param}.function.parameters"),
                    "`parameters` must be a JSON schema object",
                ))
            }
        };
        out.push(FunctionSpec {
            name: name.to_string(),
            parameters,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
    }

    fn param_of(body: Value) -> String {
        let err = ToolRequest::read(&body).unwrap_err();
        err.body()["error"]["param"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    #[test]
    fn tools_and_choices_are_read_and_checked() {
        let r = ToolRequest::read(&json!({"tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false})).unwrap().unwrap();
        assert_eq!(r.choice, ToolChoice::Named("get_weather".into()));
        assert!(!r.parallel);
        assert_eq!(ToolRequest::read(&json!({"tools": []})).unwrap(), None);
        assert_eq!(param_of(json!({"tool_choice": "required"})), "tool_choice");
        assert_eq!(
            param_of(
                json!({"tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "nope"}}})
            ),
            "tool_choice"
        );
        assert_eq!(
            param_of(json!({"tools": [weather(), weather()]})),
            "tools[1].function.name"
        );
        assert_eq!(
            param_of(json!({"tools": [{"type": "function", "function": {"name": "a b"}}]})),
            "tools[0].function.name"
        );
        assert_eq!(
            param_of(json!({"tools": [{"type": "retrieval"}]})),
            "tools[0].type"
        );
        let many: Vec<Value> = (0..=MAX_TOOLS)
            .map(|i| json!({"type": "function", "function": {"name": format!("f{i}")}}))
            .collect();
        assert_eq!(param_of(json!({"tools": many})), "tools");
    }

    #[test]
    fn required_and_named_choices_become_constraints_with_the_scope_narrowing() {
        let scope = ToolScope {
            allowed: Some(vec!["get_*".into()]),
            narrowed: BTreeMap::from([(
                "get_weather".to_string(),
                json!({"properties": {"city": {"enum": ["Paris"]}}}),
            )]),
        };
        let mut r = ToolRequest::read(
            &json!({"tools": [weather()], "tool_choice": "required", "parallel_tool_calls": false}),
        )
        .unwrap()
        .unwrap();
        let Some(ConstraintSpec::JsonSchema(list)) = r.constraint(&scope) else {
            panic!()
        };
        assert_eq!(list["maxItems"], 1);
        assert_eq!(
            list["items"]["anyOf"][0]["properties"]["name"]["const"],
            "get_weather"
        );
        assert_eq!(
            list["items"]["anyOf"][0]["properties"]["parameters"]["allOf"][1]["properties"]["city"]
                ["enum"][0],
            "Paris"
        );
        r.choice = ToolChoice::Auto;
        assert_eq!(r.constraint(&scope), None);
        assert!(r.check_scope(&scope).is_ok());
        let strict = ToolScope {
            allowed: Some(vec!["search".into()]),
            ..ToolScope::default()
        };
        assert!(
            matches!(r.check_scope(&strict), Err(ApiError::ToolForbidden(name)) if name == "get_weather")
        );
    }
}
