//! Tenant policies and the price table, read from a TOML file and reloadable while serving.
//! `[defaults]` applies to every tenant and each `[tenants.NAME]` overrides it field by
//! field; a tenant that has keys but no section gets the defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rust_decimal::Decimal;
use serde::Deserialize;

use crate::error::GatewayError;
use crate::ids::TenantId;
use crate::pricing::ModelPrice;

/// Budget of one tenant in `currency` (the policy's).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub daily: Option<Decimal>,
    pub monthly: Option<Decimal>,
    /// Hard budgets refuse requests that could overspend; soft ones only alert.
    #[serde(default = "yes")]
    pub hard: bool,
    /// Fractions of a budget at which to alert, e.g. [0.5, 0.8, 1.0].
    #[serde(default = "default_alerts")]
    pub alerts: Vec<Decimal>,
    /// POSTed a JSON alert when a threshold is crossed.
    pub webhook: Option<String>,
}

fn yes() -> bool {
    true
}

fn default_alerts() -> Vec<Decimal> {
    vec![Decimal::new(8, 1), Decimal::ONE]
}

/// One tenant's rules as written; every field optional so sections can be layered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFields {
    models: Option<Vec<String>>,
    requests_per_minute: Option<u64>,
    tokens_per_minute: Option<u64>,
    max_concurrent: Option<u64>,
    max_tokens: Option<usize>,
    max_prompt_tokens: Option<usize>,
    priority: Option<String>,
    slo_class: Option<String>,
    cache_group: Option<String>,
    admin: Option<bool>,
    budget: Option<Budget>,
    tools: Option<Vec<String>>,
    tool_arguments: Option<BTreeMap<String, serde_json::Value>>,
}

impl PolicyFields {
    fn over(self, base: &PolicyFields) -> PolicyFields {
        PolicyFields {
            models: self.models.or_else(|| base.models.clone()),
            requests_per_minute: self.requests_per_minute.or(base.requests_per_minute),
            tokens_per_minute: self.tokens_per_minute.or(base.tokens_per_minute),
            max_concurrent: self.max_concurrent.or(base.max_concurrent),
            max_tokens: self.max_tokens.or(base.max_tokens),
            max_prompt_tokens: self.max_prompt_tokens.or(base.max_prompt_tokens),
            priority: self.priority.or_else(|| base.priority.clone()),
            slo_class: self.slo_class.or_else(|| base.slo_class.clone()),
            cache_group: self.cache_group.or_else(|| base.cache_group.clone()),
            admin: self.admin.or(base.admin),
            budget: self.budget.or_else(|| base.budget.clone()),
            tools: self.tools.or_else(|| base.tools.clone()),
            tool_arguments: self.tool_arguments.or_else(|| base.tool_arguments.clone()),
        }
    }
}

/// A tenant's effective policy. `None` limits are unlimited.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantPolicy {
    /// `None`: every served model.
    pub models: Option<Vec<String>>,
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
    pub max_concurrent: Option<u64>,
    pub max_tokens: Option<usize>,
    pub max_prompt_tokens: Option<usize>,
    /// The engine priority (lower runs first) of the tenant's class.
    pub priority: i32,
    /// The latency class the server's SLO classes know the tenant by: `slo_class` as
    /// written, else the name of its priority class.
    pub slo_class: String,
    /// Tenants in the same group share prefix-cache entries.
    pub cache_group: Option<String>,
    pub admin: bool,
    pub budget: Option<Budget>,
    /// The functions the tenant may offer a model, as names or glob patterns (`*`, `?`);
    /// `None`: any.
    pub tools: Option<Vec<String>>,
    /// Per function, a JSON schema its arguments must also match (narrowing the one the
    /// request declares, e.g. to allowed URL hosts).
    pub tool_arguments: BTreeMap<String, serde_json::Value>,
}

impl TenantPolicy {
    pub fn allows_model(&self, model: &str) -> bool {
        self.models
            .as_ref()
            .is_none_or(|m| m.iter().any(|n| n == model || n == "*"))
    }

    pub fn allows_tool(&self, name: &str) -> bool {
        allows_tool(self.tools.as_deref(), name)
    }
}

/// Whether a tool scope (name patterns; `None`: any) allows function `name`.
pub fn allows_tool(patterns: Option<&[String]>, name: &str) -> bool {
    patterns.is_none_or(|patterns| patterns.iter().any(|p| glob_matches(p, name)))
}

/// `*` matches any run of characters, `?` any one; everything else itself.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer matching with backtracking to the last `*`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default = "default_currency")]
    currency: String,
    #[serde(default)]
    priority_classes: BTreeMap<String, i32>,
    #[serde(default)]
    pricing: BTreeMap<String, ModelPrice>,
    #[serde(default)]
    defaults: PolicyFields,
    #[serde(default)]
    tenants: BTreeMap<String, PolicyFields>,
}

fn default_currency() -> String {
    "USD".into()
}

/// Everything the file says, resolved.
#[derive(Debug, Clone)]
pub struct Policy {
    pub currency: String,
    pricing: BTreeMap<String, ModelPrice>,
    defaults: TenantPolicy,
    tenants: BTreeMap<TenantId, TenantPolicy>,
}

/// The classes every config has; `[priority_classes]` may add or renumber them.
fn builtin_classes() -> BTreeMap<String, i32> {
    BTreeMap::from([("interactive".to_string(), 0), ("batch".to_string(), 10)])
}

impl Default for Policy {
    /// No file: no limits, every model, nothing is priced.
    fn default() -> Self {
        Policy::from_toml("").expect("the empty policy is valid")
    }
}

impl Policy {
    pub fn from_toml(text: &str) -> Result<Policy, String> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut classes = builtin_classes();
        classes.extend(file.priority_classes);
        let resolve = |name: &str, fields: PolicyFields| -> Result<TenantPolicy, String> {
            let priority = match fields.priority.as_deref() {
                None => classes["interactive"],
                Some(class) => *classes.get(class).ok_or_else(|| {
                    format!("{name}: unknown priority class `{class}` (define it in [priority_classes])")
                })?,
            };
            if let Some(b) = &fields.budget {
                for (what, v) in [("daily", b.daily), ("monthly", b.monthly)] {
                    if v.is_some_and(|v| v < Decimal::ZERO) {
                        return Err(format!("{name}: the {what} budget is negative"));
                    }
                }
            }
            Ok(TenantPolicy {
                models: fields.models,
                requests_per_minute: fields.requests_per_minute,
                tokens_per_minute: fields.tokens_per_minute,
                max_concurrent: fields.max_concurrent,
                max_tokens: fields.max_tokens,
                max_prompt_tokens: fields.max_prompt_tokens,
                priority,
                slo_class: fields
                    .slo_class
                    .or(fields.priority)
                    .unwrap_or_else(|| "interactive".into()),
                cache_group: fields.cache_group,
                admin: fields.admin.unwrap_or(false),
                budget: fields.budget,
                tools: fields.tools,
                tool_arguments: fields.tool_arguments.unwrap_or_default(),
            })
        };
        let defaults = resolve("[defaults]", file.defaults.clone())?;
        let mut tenants = BTreeMap::new();
        for (name, fields) in file.tenants {
            let policy = resolve(&format!("[tenants.{name}]"), fields.over(&file.defaults))?;
            tenants.insert(TenantId::new(name), policy);
        }
        for (model, price) in &file.pricing {
            if price.input < Decimal::ZERO
                || price.output < Decimal::ZERO
                || price.cached_input.is_some_and(|c| c < Decimal::ZERO)
            {
                return Err(format!(
                    "[pricing.\"{model}\"]: prices must not be negative"
                ));
            }
        }
        Ok(Policy {
            currency: file.currency,
            pricing: file.pricing,
            defaults,
            tenants,
        })
    }

    pub fn tenant(&self, tenant: &TenantId) -> &TenantPolicy {
        self.tenants.get(tenant).unwrap_or(&self.defaults)
    }

    /// The tenants the file names, in name order (others get `tenant`'s defaults).
    pub fn named_tenants(&self) -> impl Iterator<Item = (&TenantId, &TenantPolicy)> {
        self.tenants.iter()
    }

    /// The model's prices; an unpriced model costs nothing (warned about at startup).
    pub fn price(&self, model: &str) -> ModelPrice {
        self.pricing.get(model).cloned().unwrap_or(ModelPrice {
            input: Decimal::ZERO,
            cached_input: None,
            output: Decimal::ZERO,
        })
    }

    pub fn is_priced(&self, model: &str) -> bool {
        self.pricing.contains_key(model)
    }

    /// Some tenant (or the defaults) has a budget: then an unpriced model would let its
    /// requests through for free, and is refused.
    pub fn has_budgets(&self) -> bool {
        self.defaults.budget.is_some() || self.tenants.values().any(|t| t.budget.is_some())
    }
}

/// The current policy, swapped atomically when the file changes.
pub struct PolicyStore {
    path: Option<PathBuf>,
    current: RwLock<(Arc<Policy>, Option<SystemTime>)>,
}

impl PolicyStore {
    pub fn fixed(policy: Policy) -> PolicyStore {
        PolicyStore {
            path: None,
            current: RwLock::new((Arc::new(policy), None)),
        }
    }

    pub fn load(path: &Path) -> Result<PolicyStore, GatewayError> {
        let (policy, mtime) = read(path)?;
        Ok(PolicyStore {
            path: Some(path.to_path_buf()),
            current: RwLock::new((Arc::new(policy), mtime)),
        })
    }

    pub fn current(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Re-reads the file if it changed. A broken file is reported and the old policy kept,
    /// so a typo cannot open the gates or close them.
    pub fn reload_if_changed(&self) -> Result<bool, GatewayError> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if mtime == self.current.read().unwrap_or_else(|e| e.into_inner()).1 {
            return Ok(false);
        }
        let (policy, mtime) = read(path)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (Arc::new(policy), mtime);
        Ok(true)
    }

    /// Polls the file every `every` on a thread of its own.
    pub fn watch(self: &Arc<Self>, every: Duration) {
        if self.path.is_none() {
            return;
        }
        let store = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("gateway-policy".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let Some(store) = store.upgrade() else { return };
                match store.reload_if_changed() {
                    Ok(true) => tracing::info!("gateway policy reloaded"),
                    Ok(false) => {}
                    Err(e) => tracing::error!(error = %e, "gateway policy not reloaded; keeping the old one"),
                }
            })
            .expect("spawning the policy watcher");
    }
}

fn read(path: &Path) -> Result<(Policy, Option<SystemTime>), GatewayError> {
    let fail = |reason: String| GatewayError::Config {
        path: path.display().to_string(),
        reason,
    };
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    Ok((Policy::from_toml(&text).map_err(fail)?, mtime))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
currency = "EUR"
[priority_classes]
bulk = 20
[pricing."tiny-qwen2"]
input = "0.50"
cached_input = "0.05"
output = "1.50"
[defaults]
requests_per_minute = 60
models = ["tiny-qwen2"]
[tenants.acme]
priority = "batch"
max_tokens = 64
budget = { daily = "10", hard = true }
[tenants.night]
priority = "bulk"
slo_class = "overnight"
models = ["*"]
"#;

    #[test]
    fn tenants_inherit_defaults_and_map_classes_to_priorities() {
        let policy = Policy::from_toml(EXAMPLE).unwrap();
        assert_eq!(policy.currency, "EUR");
        let acme = policy.tenant(&TenantId::new("acme"));
        assert_eq!(acme.requests_per_minute, Some(60));
        assert_eq!(acme.priority, 10);
        assert_eq!(acme.max_tokens, Some(64));
        assert!(acme.allows_model("tiny-qwen2") && !acme.allows_model("other"));
        assert_eq!(acme.budget.as_ref().unwrap().alerts.len(), 2);
        assert_eq!(policy.tenant(&TenantId::new("night")).priority, 20);
        // The latency class: as written, else the priority class's name.
        assert_eq!(
            policy.tenant(&TenantId::new("night")).slo_class,
            "overnight"
        );
        assert_eq!(acme.slo_class, "batch");
        assert_eq!(
            policy.tenant(&TenantId::new("stranger")).slo_class,
            "interactive"
        );
        assert!(policy.tenant(&TenantId::new("night")).allows_model("other"));
        assert_eq!(policy.tenant(&TenantId::new("stranger")).priority, 0);
        assert!(policy.is_priced("tiny-qwen2"));
    }

    #[test]
    fn mistakes_in_the_file_are_refused() {
        assert!(Policy::from_toml("[tenants.a]\npriority = \"urgent\"\n").is_err());
        assert!(Policy::from_toml("[tenants.a]\nrequests_per_minit = 5\n").is_err());
        assert!(Policy::from_toml("[pricing.m]\ninput = \"-1\"\noutput = \"1\"\n").is_err());
    }

    #[test]
    fn a_changed_file_is_reloaded_and_a_broken_one_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gw.toml");
        std::fs::write(&path, "[tenants.a]\nmax_tokens = 5\n").unwrap();
        let store = PolicyStore::load(&path).unwrap();
        let a = TenantId::new("a");
        assert_eq!(store.current().tenant(&a).max_tokens, Some(5));
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, "[tenants.a]\nmax_tokens = 7\n").unwrap();
        assert!(store.reload_if_changed().unwrap());
        assert_eq!(store.current().tenant(&a).max_tokens, Some(7));
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, "[tenants.a\n").unwrap();
        assert!(store.reload_if_changed().is_err());
        assert_eq!(store.current().tenant(&a).max_tokens, Some(7));
    }
}

#[cfg(test)]
mod tool_scope_tests {
    use super::*;

    #[test]
    fn tool_scopes_take_globs_and_narrowing_schemas() {
        let policy = Policy::from_toml(
            r#"
[defaults]
tools = ["search", "get_*"]
[tenants.agent]
tools = ["fetch_url", "calc?"]
[tenants.agent.tool_arguments.fetch_url]
properties = { url = { type = "string", pattern = "^https://docs\\.example\\.com/" } }
required = ["url"]
[tenants.open]
"#,
        )
        .unwrap();
        let defaults = policy.tenant(&TenantId::new("anyone"));
        assert!(defaults.allows_tool("search") && defaults.allows_tool("get_weather"));
        assert!(!defaults.allows_tool("searchx") && !defaults.allows_tool("fetch_url"));
        let agent = policy.tenant(&TenantId::new("agent"));
        assert!(agent.allows_tool("fetch_url") && agent.allows_tool("calc1"));
        assert!(!agent.allows_tool("calc") && !agent.allows_tool("calc12"));
        assert_eq!(
            agent.tool_arguments["fetch_url"]["properties"]["url"]["pattern"],
            "^https://docs\\.example\\.com/"
        );
        // A section without `tools` inherits the defaults' list.
        assert!(!policy
            .tenant(&TenantId::new("open"))
            .allows_tool("fetch_url"));
        assert!(Policy::default()
            .tenant(&TenantId::new("x"))
            .allows_tool("anything"));
    }

    #[test]
    fn globs_match_whole_names() {
        for (p, n, m) in [
            ("*", "", true),
            ("a*c", "abbbc", true),
            ("a*c", "abcd", false),
            ("*_x", "a_b_x", true),
            ("?", "", false),
            ("a?*", "ab", true),
        ] {
            assert_eq!(glob_matches(p, n), m, "{p} {n}");
        }
    }
}
