//! Counters of the guard's decisions for `/metrics`: what was decided at each stage, which
//! injection rules matched and which entity types were found. Types and rule ids only, never
//! values; no tenant label, so an unauthenticated scrape learns nothing about who sent what.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use pagoda_guard::audit::{AuditEvent, Decision, Stage};

#[derive(Default)]
struct Counts {
    decisions: BTreeMap<(&'static str, &'static str), u64>,
    rules: BTreeMap<String, u64>,
    entities: BTreeMap<&'static str, u64>,
    canary_leaks: u64,
    tool_calls_refused: u64,
}

#[derive(Default)]
pub struct GuardCounters {
    counts: Mutex<Counts>,
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Request => "request",
        Stage::Response => "response",
    }
}

/// The names the audit log writes.
fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Transform => "transform",
        Decision::Block => "block",
        Decision::Flag => "flag",
        Decision::End => "end",
    }
}

impl GuardCounters {
    pub fn observe(&self, event: &AuditEvent) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let key = (stage_name(event.stage), decision_name(event.decision));
        *c.decisions.entry(key).or_default() += 1;
        for rule in &event.rules {
            *c.rules.entry(rule.0.clone()).or_default() += 1;
        }
        for (kind, n) in &event.entities {
            *c.entities.entry(kind.name()).or_default() += *n as u64;
        }
        c.canary_leaks += u64::from(event.canary_leaked);
        c.tool_calls_refused += event.tool_calls_refused.len() as u64;
    }

    pub fn render(&self, out: &mut String) {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "# HELP pagoda:guard_decisions_total Guard decisions by stage (request, response) and decision.");
        let _ = writeln!(out, "# TYPE pagoda:guard_decisions_total counter");
        for ((stage, decision), n) in &c.decisions {
            let _ = writeln!(
                out,
                "pagoda:guard_decisions_total{{stage=\"{stage}\",decision=\"{decision}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP pagoda:guard_rule_matches_total Injection rule matches by rule id."
        );
        let _ = writeln!(out, "# TYPE pagoda:guard_rule_matches_total counter");
        for (rule, n) in &c.rules {
            let rule = rule.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(
                out,
                "pagoda:guard_rule_matches_total{{rule=\"{rule}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP pagoda:guard_entities_total Sensitive values found, by entity type."
        );
        let _ = writeln!(out, "# TYPE pagoda:guard_entities_total counter");
        for (kind, n) in &c.entities {
            let _ = writeln!(out, "pagoda:guard_entities_total{{kind=\"{kind}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP pagoda:guard_canary_leaks_total Responses cut short because they leaked the canary.");
        let _ = writeln!(out, "# TYPE pagoda:guard_canary_leaks_total counter");
        let _ = writeln!(out, "pagoda:guard_canary_leaks_total {}", c.canary_leaks);
        let _ = writeln!(out, "# HELP pagoda:guard_tool_calls_refused_total Tool calls of responses that were not returned.");
        let _ = writeln!(out, "# TYPE pagoda:guard_tool_calls_refused_total counter");
        let _ = writeln!(
            out,
            "pagoda:guard_tool_calls_refused_total {}",
            c.tool_calls_refused
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagoda_guard::{EntityKind, RuleId};

    fn event(stage: Stage, decision: Decision) -> AuditEvent {
        AuditEvent {
            request_id: "r".into(),
            tenant: Some("acme".into()),
            stage,
            decision,
            entities: Default::default(),
            rules: Vec::new(),
            injection_score: None,
            canary_leaked: false,
            prompt_leaked: false,
            incomplete: false,
            tool_calls_refused: Vec::new(),
        }
    }

    #[test]
    fn decisions_rules_and_entities_are_counted_without_tenants_or_values() {
        let c = GuardCounters::default();
        let mut blocked = event(Stage::Request, Decision::Block);
        blocked.entities.insert(EntityKind::Card, 2);
        blocked.rules.push(RuleId("ignore_previous".into()));
        c.observe(&blocked);
        c.observe(&blocked);
        c.observe(&event(Stage::Response, Decision::Allow));
        let mut leaked = event(Stage::Response, Decision::End);
        leaked.canary_leaked = true;
        leaked.tool_calls_refused = vec!["rm".into()];
        c.observe(&leaked);
        let mut out = String::new();
        c.render(&mut out);
        for line in [
            "pagoda:guard_decisions_total{stage=\"request\",decision=\"block\"} 2",
            "pagoda:guard_decisions_total{stage=\"response\",decision=\"allow\"} 1",
            "pagoda:guard_decisions_total{stage=\"response\",decision=\"end\"} 1",
            "pagoda:guard_rule_matches_total{rule=\"ignore_previous\"} 2",
            "pagoda:guard_entities_total{kind=\"CARD\"} 4",
            "pagoda:guard_canary_leaks_total 1",
            "pagoda:guard_tool_calls_refused_total 1",
        ] {
            assert!(out.contains(line), "{line} not in {out}");
        }
        assert!(!out.contains("acme"));
    }
}
