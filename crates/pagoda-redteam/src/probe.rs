//! Probes and detectors as YAML, and the built-in packs.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::RedteamError;

/// A file of probes (a pack).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeFile {
    pub probes: Vec<Probe>,
}

/// One attack: a system prompt (with `{canary}` replaced by a fresh canary per attempt),
/// one or more user turns sent in order (each after the target's previous reply), optional
/// tool definitions, and the detectors that decide whether the attack succeeded.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    pub id: String,
    pub category: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub system: Option<String>,
    pub turns: Vec<Turn>,
    /// Names of tools offered to the model (as OpenAI `tools`, a single `to`/`body` schema).
    #[serde(default)]
    pub tools: Vec<String>,
    pub detectors: Vec<DetectorSpec>,
}

/// A user turn, or content handed to the model as a tool result (indirect injection).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Turn {
    User(String),
    Message {
        role: String,
        content: String,
    },
    /// Content sent as text parts: each may pass a filter that the joined text would not.
    Parts {
        role: String,
        parts: Vec<String>,
    },
}

impl Turn {
    pub fn role(&self) -> &str {
        match self {
            Turn::User(_) => "user",
            Turn::Message { role, .. } | Turn::Parts { role, .. } => role,
        }
    }

    /// The chat message, with `{canary}` replaced.
    pub fn message(&self, canary: &str) -> serde_json::Value {
        let fill = |text: &str| text.replace("{canary}", canary);
        let content = match self {
            Turn::User(c) | Turn::Message { content: c, .. } => serde_json::json!(fill(c)),
            Turn::Parts { parts, .. } => parts
                .iter()
                .map(|p| serde_json::json!({"type": "text", "text": fill(p)}))
                .collect(),
        };
        serde_json::json!({"role": self.role(), "content": content})
    }
}

/// How a reply is judged.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DetectorSpec {
    /// Any of these strings in a reply (case-insensitive) means success.
    Substring { any: Vec<String> },
    /// The pattern matching a reply means success.
    Regex { pattern: String },
    /// The attempt's canary in a reply means the system prompt leaked.
    Canary,
    /// A call of this tool: a `tool_calls` entry, or a call written out in the text.
    ToolCall { name: String },
    /// A refusal. With `success_if_absent: false` (default) it vetoes substring and regex
    /// hits (a refusal quoting the attack is no success); with `true`, not refusing is the
    /// success (for probes without a marker to look for).
    Refusal {
        #[serde(default)]
        success_if_absent: bool,
    },
}

const BUILTIN: [(&str, &str); 7] = [
    (
        "roleplay_jailbreak",
        include_str!("../probes/roleplay_jailbreak.yaml"),
    ),
    (
        "system_prompt_extraction",
        include_str!("../probes/system_prompt_extraction.yaml"),
    ),
    (
        "indirect_injection",
        include_str!("../probes/indirect_injection.yaml"),
    ),
    (
        "encoded_requests",
        include_str!("../probes/encoded_requests.yaml"),
    ),
    (
        "pii_exfiltration",
        include_str!("../probes/pii_exfiltration.yaml"),
    ),
    (
        "multi_turn_escalation",
        include_str!("../probes/multi_turn_escalation.yaml"),
    ),
    (
        "guard_evasion",
        include_str!("../probes/guard_evasion.yaml"),
    ),
];

pub fn parse(source_name: &str, text: &str) -> Result<Vec<Probe>, RedteamError> {
    let err = |reason: String| RedteamError::Probes {
        source_name: source_name.to_string(),
        reason,
    };
    let file: ProbeFile = serde_yaml_ng::from_str(text).map_err(|e| err(e.to_string()))?;
    for p in &file.probes {
        if p.turns.is_empty() {
            return Err(err(format!("probe `{}` has no turns", p.id)));
        }
        if p.detectors.is_empty() {
            return Err(err(format!("probe `{}` has no detectors", p.id)));
        }
        for d in &p.detectors {
            if let DetectorSpec::Regex { pattern } = d {
                regex::Regex::new(pattern)
                    .map_err(|e| err(format!("probe `{}`: bad regex: {e}", p.id)))?;
            }
        }
    }
    if file.probes.is_empty() {
        return Err(err("no probes".into()));
    }
    Ok(file.probes)
}

/// Every built-in pack.
pub fn builtin() -> Vec<Probe> {
    BUILTIN
        .iter()
        .flat_map(|(name, text)| parse(name, text).expect("built-in packs are valid"))
        .collect()
}

/// `builtin` or a YAML file.
pub fn load(spec: &str) -> Result<Vec<Probe>, RedteamError> {
    if spec == "builtin" {
        return Ok(builtin());
    }
    let path = Path::new(spec);
    let text = std::fs::read_to_string(path).map_err(|e| RedteamError::ProbeFile {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    parse(spec, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_packs_cover_every_category() {
        let probes = builtin();
        for cat in BUILTIN.map(|(name, _)| name) {
            assert!(
                probes.iter().any(|p| p.category == cat),
                "no probe in {cat}"
            );
        }
        let mut ids: Vec<&str> = probes.iter().map(|p| p.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), probes.len(), "probe ids are unique");
    }

    #[test]
    fn bad_yaml_is_refused_with_the_reason() {
        let err = parse("x.yaml", "probes:\n  - id: a\n    category: c\n    turns: [hi]\n    detectors: [{type: sparkle}]").unwrap_err();
        assert!(err.to_string().contains("sparkle"), "{err}");
        let err = parse("x.yaml", "probes:\n  - id: a\n    category: c\n    turns: [hi]\n    detectors: [{type: regex, pattern: '('}]").unwrap_err();
        assert!(err.to_string().contains("bad regex"), "{err}");
    }
}
