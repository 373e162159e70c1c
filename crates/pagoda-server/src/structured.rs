//! What a request asks its output to match, read from OpenAI's `response_format` and vLLM's
//! `structured_outputs` and older `guided_*` parameters, then compiled against the model's
//! vocabulary. A schema, regex or grammar that cannot be enforced is a 400 naming its
//! parameter: never a 200 with unconstrained text.

use pagoda_runtime::{Constraint, ConstraintSpec, EngineHandle, RuntimeError, StructuredError};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A constraint a request asked for, and the parameter that asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Requested {
    pub spec: ConstraintSpec,
    pub param: String,
}

/// The request's constraint, if any; asking in more than one way is a 400.
pub fn requested(body: &Value) -> Result<Option<Requested>, ApiError> {
    let mut found: Option<Requested> = None;
    let mut add = |r: Requested| match &found {
        Some(first) => Err(ApiError::invalid(
            &r.param,
            format!(
                "`{}` and `{}` both constrain the output; give one",
                first.param, r.param
            ),
        )),
        None => {
            found = Some(r);
            Ok(())
        }
    };
    if let Some(format) = present(body, "response_format") {
        if let Some(r) = response_format(format)? {
            add(r)?;
        }
    }
    if let Some(outputs) = present(body, "structured_outputs") {
        let fields = outputs.as_object().ok_or_else(|| {
            ApiError::invalid(
                "structured_outputs",
                "`structured_outputs` must be an object",
            )
        })?;
        for r in structured_outputs(fields)? {
            add(r)?;
        }
    }
    for (name, kind) in [
        ("guided_json", Kind::Json),
        ("guided_regex", Kind::Regex),
        ("guided_choice", Kind::Choice),
        ("guided_grammar", Kind::Grammar),
    ] {
        if let Some(value) = present(body, name) {
            add(kind.read(value, name)?)?;
        }
    }
    Ok(found)
}

/// Compiles `requested` for the loaded model (on the blocking pool: a large schema takes
/// milliseconds).
pub fn compile(engine: &EngineHandle, requested: &Requested) -> Result<Constraint, ApiError> {
    let grammars = engine.grammars().map_err(|e| match e {
        RuntimeError::StructuredUnavailable(_) => {
            ApiError::invalid(&requested.param, e.to_string())
        }
        other => ApiError::from(other),
    })?;
    grammars.compile(&requested.spec).map_err(|e| match e {
        StructuredError::Invalid { reason } => ApiError::invalid(
            &requested.param,
            format!(
                "cannot constrain the output to this {}: {reason}",
                requested.spec.kind()
            ),
        ),
        other => ApiError::Internal(other.to_string()),
    })
}

/// A field that is there and not `null`.
fn present<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body.get(name).filter(|v| !v.is_null())
}

#[derive(Clone, Copy)]
enum Kind {
    Json,
    Regex,
    Choice,
    Grammar,
}

impl Kind {
    fn read(self, value: &Value, param: &str) -> Result<Requested, ApiError> {
        let spec = match self {
            Kind::Json => ConstraintSpec::JsonSchema(schema(value, param)?),
            Kind::Regex => ConstraintSpec::Regex(text(value, param)?),
            Kind::Grammar => ConstraintSpec::Grammar(text(value, param)?),
            Kind::Choice => {
                let items = value.as_array().ok_or_else(|| {
                    ApiError::invalid(param, format!("`{param}` must be a list of strings"))
                })?;
                let choices = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| {
                        ApiError::invalid(param, format!("`{param}` must be a list of strings"))
                    })?;
                if choices.is_empty() {
                    return Err(ApiError::invalid(param, format!("`{param}` is empty")));
                }
                ConstraintSpec::Choice(choices)
            }
        };
        Ok(Requested {
            spec,
            param: param.to_string(),
        })
    }
}

fn text(value: &Value, param: &str) -> Result<String, ApiError> {
    match value.as_str() {
        Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
        Some(_) => Err(ApiError::invalid(param, format!("`{param}` is empty"))),
        None => Err(ApiError::invalid(
            param,
            format!("`{param}` must be a string"),
        )),
    }
}

/// A JSON schema given as an object, a boolean, or a string holding either.
fn schema(value: &Value, param: &str) -> Result<Value, ApiError> {
    let schema = match value {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| ApiError::invalid(param, format!("`{param}` is not valid JSON: {e}")))?,
        other => other.clone(),
    };
    if schema.is_object() || schema.is_boolean() {
        Ok(schema)
    } else {
        Err(ApiError::invalid(
            param,
            format!("`{param}` must be a JSON schema (an object)"),
        ))
    }
}

fn response_format(format: &Value) -> Result<Option<Requested>, ApiError> {
    let kind = format.get("type").and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(
            "response_format.type",
            "`response_format.type` must be `text`, `json_object` or `json_schema`",
        )
    })?;
    let spec = match kind {
        "text" => return Ok(None),
        "json_object" => ConstraintSpec::JsonObject,
        "json_schema" => {
            let param = "response_format.json_schema.schema";
            let wrapper = format.get("json_schema").ok_or_else(|| {
                ApiError::invalid(
                    "response_format.json_schema",
                    "`response_format.json_schema` is required when `type` is `json_schema`",
                )
            })?;
            match present(wrapper, "schema") {
                Some(value) => ConstraintSpec::JsonSchema(schema(value, param)?),
                // OpenAI's default when no schema is given: any JSON.
                None => ConstraintSpec::JsonSchema(Value::Bool(true)),
            }
        }
        other => {
            return Err(ApiError::invalid(
                "response_format.type",
                format!(
                    "`response_format.type` `{other}` is not supported; use `text`, `json_object` or `json_schema`"
                ),
            ))
        }
    };
    Ok(Some(Requested {
        spec,
        param: "response_format".into(),
    }))
}

/// vLLM's `structured_outputs`: exactly one of `json`, `regex`, `choice`, `grammar`,
/// `json_object`.
fn structured_outputs(fields: &Map<String, Value>) -> Result<Vec<Requested>, ApiError> {
    let mut out = Vec::new();
    for (name, value) in fields.iter().filter(|(_, v)| !v.is_null()) {
        let param = format!("structured_outputs.{name}");
        let kind = match name.as_str() {
            "json" => Kind::Json,
            "regex" => Kind::Regex,
            "choice" => Kind::Choice,
            "grammar" => Kind::Grammar,
            "json_object" => {
                if value.as_bool() == Some(true) {
                    out.push(Requested {
                        spec: ConstraintSpec::JsonObject,
                        param,
                    });
                }
                continue;
            }
            // Options of the constraint, not constraints: accepted as vLLM does.
            "disable_any_whitespace" | "disable_additional_properties" | "whitespace_pattern"
            | "disable_fallback" => continue,
            "structural_tag" => {
                return Err(ApiError::invalid(&param, "`structural_tag` is not supported"))
            }
            other => {
                return Err(ApiError::invalid(
                    &param,
                    format!("unknown structured output `{other}`; use json, regex, choice, grammar or json_object"),
                ))
            }
        };
        out.push(kind.read(value, &param)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(body: Value) -> Result<Option<(ConstraintSpec, String)>, String> {
        requested(&body)
            .map(|r| r.map(|r| (r.spec, r.param)))
            .map_err(|e| {
                e.body()["error"]["param"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
    }

    #[test]
    fn every_way_of_asking_is_read() {
        let schema = json!({"type": "object"});
        assert_eq!(spec(json!({"response_format": {"type": "text"}})), Ok(None));
        assert_eq!(
            spec(json!({"response_format": {"type": "json_object"}})),
            Ok(Some((ConstraintSpec::JsonObject, "response_format".into())))
        );
        assert_eq!(
            spec(
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": true}}})
            ),
            Ok(Some((
                ConstraintSpec::JsonSchema(schema.clone()),
                "response_format".into()
            )))
        );
        assert_eq!(
            spec(json!({"structured_outputs": {"json": "{\"type\": \"object\"}"}})),
            Ok(Some((
                ConstraintSpec::JsonSchema(schema.clone()),
                "structured_outputs.json".into()
            )))
        );
        assert_eq!(
            spec(json!({"structured_outputs": {"choice": ["a", "b"]}})),
            Ok(Some((
                ConstraintSpec::Choice(vec!["a".into(), "b".into()]),
                "structured_outputs.choice".into()
            )))
        );
        assert_eq!(
            spec(json!({"guided_regex": "[0-9]+", "guided_json": null})),
            Ok(Some((
                ConstraintSpec::Regex("[0-9]+".into()),
                "guided_regex".into()
            )))
        );
        assert_eq!(
            spec(json!({"guided_grammar": "start: \"x\""})),
            Ok(Some((
                ConstraintSpec::Grammar("start: \"x\"".into()),
                "guided_grammar".into()
            )))
        );
    }

    #[test]
    fn bad_or_conflicting_requests_name_their_parameter() {
        for (body, param) in [
            (
                json!({"response_format": {"type": "yaml"}}),
                "response_format.type",
            ),
            (
                json!({"response_format": {"type": "json_schema"}}),
                "response_format.json_schema",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}),
                "response_format.json_schema.schema",
            ),
            (
                json!({"structured_outputs": {"choice": ["b"], "regex": "a"}}),
                "structured_outputs.regex",
            ),
            (
                json!({"structured_outputs": {"cfg": "x"}}),
                "structured_outputs.cfg",
            ),
            (json!({"guided_choice": []}), "guided_choice"),
            (json!({"guided_choice": [1]}), "guided_choice"),
            (json!({"guided_json": "{not json"}), "guided_json"),
            (
                json!({"response_format": {"type": "json_object"}, "guided_regex": "a"}),
                "guided_regex",
            ),
        ] {
            assert_eq!(spec(body.clone()), Err(param.to_string()), "{body}");
        }
    }
}
