//! What a tenant wants done: a default policy and per-tenant overrides, read from TOML.
//!
//! ```toml
//! [default]
//! restore = true
//! [default.entities]
//! EMAIL = "redact"
//! CARD = "block"
//! [default.injection]
//! threshold = 0.5
//! action = "block"
//! classifier = false
//!
//! [tenants.acme.entities]
//! EMAIL = "mask"
//! ```
//! A tenant section only lists what differs from `[default]`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::action::Action;
use crate::entity::EntityKind;
use crate::error::GuardError;

/// A tenant's name as the gateway knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TenantName(pub String);

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InjectionAction {
    /// Refuse the request (400 `prompt_injection_detected`).
    Block,
    /// Let it through, record it in the audit log.
    Flag,
    /// Do nothing (not even screen).
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeakAction {
    /// Replace the canary in the output and go on.
    Redact,
    /// End the response where the leak starts.
    End,
}

/// The effective policy of one tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub entities: BTreeMap<EntityKind, Action>,
    pub restore: bool,
    pub scan_output: bool,
    pub injection_threshold: f32,
    pub injection_action: InjectionAction,
    /// Also score with the naive Bayes classifier (better recall on paraphrases, more false
    /// positives on text unlike the corpus; docs/guardrails.md).
    pub injection_classifier: bool,
    /// Message roles screened for injection; `tool` covers tool results and retrieved text.
    pub screen_roles: Vec<String>,
    pub canary: bool,
    pub on_canary_leak: LeakAction,
    /// An output that repeats this many bytes (after folding case and spaces) of the system
    /// prompt verbatim is a leak even without the canary, and the response ends; 0 turns
    /// the check off.
    pub prompt_overlap: usize,
}

/// `prompt_overlap` by default: about eight words, longer than the stock phrases a model
/// says on its own ("I am a helpful assistant").
pub const DEFAULT_PROMPT_OVERLAP: usize = 48;

impl Default for Policy {
    fn default() -> Self {
        let entities = EntityKind::ALL
            .into_iter()
            .map(|k| {
                let action = match k {
                    EntityKind::Secret => Action::Block,
                    EntityKind::Ip => Action::Allow,
                    _ => Action::Redact,
                };
                (k, action)
            })
            .collect();
        Policy {
            entities,
            restore: false,
            scan_output: true,
            injection_threshold: 0.5,
            injection_action: InjectionAction::Block,
            injection_classifier: false,
            // Every role the client writes except `system` (operators' own instructions).
            screen_roles: ["user", "tool", "assistant", "developer", "function"]
                .map(String::from)
                .to_vec(),
            canary: true,
            // Redacting only the canary lets the rest of a recited system prompt through.
            on_canary_leak: LeakAction::End,
            prompt_overlap: DEFAULT_PROMPT_OVERLAP,
        }
    }
}

impl Policy {
    pub fn action(&self, kind: EntityKind) -> Action {
        self.entities.get(&kind).copied().unwrap_or(Action::Allow)
    }

    pub fn screens_role(&self, role: &str) -> bool {
        self.screen_roles.iter().any(|r| r == role)
    }

    fn overlay(&self, spec: &PolicySpec) -> Result<Policy, GuardError> {
        let mut p = self.clone();
        if let Some(entities) = &spec.entities {
            for (name, action) in entities {
                p.entities.insert(name.parse()?, *action);
            }
        }
        if let Some(v) = spec.restore {
            p.restore = v;
        }
        if let Some(v) = spec.scan_output {
            p.scan_output = v;
        }
        if let Some(inj) = &spec.injection {
            if let Some(t) = inj.threshold {
                if !(0.0..=1.0).contains(&t) {
                    return Err(GuardError::Policy(format!(
                        "injection.threshold must be within [0, 1], got {t}"
                    )));
                }
                p.injection_threshold = t;
            }
            if let Some(a) = inj.action {
                p.injection_action = a;
            }
            if let Some(c) = inj.classifier {
                p.injection_classifier = c;
            }
        }
        if let Some(roles) = &spec.screen_roles {
            p.screen_roles = roles.clone();
        }
        if let Some(v) = spec.canary {
            p.canary = v;
        }
        if let Some(v) = spec.on_canary_leak {
            p.on_canary_leak = v;
        }
        if let Some(v) = spec.prompt_overlap {
            if v != 0 && v < 16 {
                return Err(GuardError::Policy(format!(
                    "prompt_overlap must be 0 (off) or at least 16 bytes, got {v}"
                )));
            }
            p.prompt_overlap = v;
        }
        Ok(p)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectionSpec {
    threshold: Option<f32>,
    action: Option<InjectionAction>,
    classifier: Option<bool>,
}

/// One `[default]` or `[tenants.NAME]` section: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicySpec {
    entities: Option<BTreeMap<String, Action>>,
    restore: Option<bool>,
    scan_output: Option<bool>,
    injection: Option<InjectionSpec>,
    screen_roles: Option<Vec<String>>,
    canary: Option<bool>,
    on_canary_leak: Option<LeakAction>,
    prompt_overlap: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    default: PolicySpec,
    #[serde(default)]
    tenants: BTreeMap<String, PolicySpec>,
}

/// The default policy and the tenants' effective policies.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    default: Policy,
    tenants: HashMap<TenantName, Policy>,
}

impl Policies {
    pub fn from_toml(text: &str) -> Result<Policies, GuardError> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|e| GuardError::Policy(e.message().to_string()))?;
        let default = Policy::default().overlay(&file.default)?;
        let mut tenants = HashMap::new();
        for (name, spec) in &file.tenants {
            let policy = default
                .overlay(spec)
                .map_err(|e| GuardError::Policy(format!("tenant `{name}`: {e}")))?;
            tenants.insert(TenantName(name.clone()), policy);
        }
        Ok(Policies { default, tenants })
    }

    pub fn load(path: &Path) -> Result<Policies, GuardError> {
        let text = std::fs::read_to_string(path).map_err(|e| GuardError::PolicyFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Policies::from_toml(&text).map_err(|e| GuardError::PolicyFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// The tenant's policy, or the default for unknown or anonymous callers.
    pub fn for_tenant(&self, tenant: Option<&TenantName>) -> &Policy {
        tenant
            .and_then(|t| self.tenants.get(t))
            .unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[default]
restore = true
[default.entities]
EMAIL = "redact"
CARD = "block"
[default.injection]
threshold = 0.6
action = "flag"

[tenants.acme]
canary = false
[tenants.acme.entities]
EMAIL = "mask"
"#;

    #[test]
    fn tenants_overlay_the_default() {
        let p = Policies::from_toml(EXAMPLE).unwrap();
        let acme = p.for_tenant(Some(&TenantName("acme".into())));
        assert_eq!(acme.action(EntityKind::Email), Action::Mask);
        assert_eq!(acme.action(EntityKind::Card), Action::Block);
        assert!(acme.restore && !acme.canary);
        assert_eq!(acme.injection_action, InjectionAction::Flag);
        let other = p.for_tenant(Some(&TenantName("nobody".into())));
        assert_eq!(other.action(EntityKind::Email), Action::Redact);
        assert!(other.canary);
    }

    #[test]
    fn bad_policies_are_refused_with_a_reason() {
        let err = Policies::from_toml("[default.entities]\nPASSPORT = \"mask\"").unwrap_err();
        assert!(err.to_string().contains("PASSPORT"), "{err}");
        let err = Policies::from_toml("[default.injection]\nthreshold = 2.0").unwrap_err();
        assert!(err.to_string().contains("threshold"), "{err}");
        assert!(Policies::from_toml("[default]\nrestor = true").is_err());
    }
}
