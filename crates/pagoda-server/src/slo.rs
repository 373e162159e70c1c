//! SLO classes: named latency targets (time to first token, inter-token latency) that a request
//! runs under. A class's ITL target sizes the engine's steps while the request runs; both
//! targets are checked when it finishes and counted per class on `/metrics`.
//!
//! A request's class: the tenant's (gateway policy `slo_class`, else its priority class's name
//! when a class of that name is defined), else `--default-slo-class`; a request may name a
//! class of its own (`slo_class` in the body) that is no tighter than that one: like priority,
//! a client can relax its targets, not tighten them at others' expense.

use std::collections::BTreeMap;
use std::sync::Arc;

use pagoda_runtime::Completion;

use crate::error::ApiError;

/// Longest class name accepted (in flags and in requests).
const MAX_NAME_LEN: usize = 64;
/// Targets above this are refused (a typo more likely than a wish).
const MAX_TARGET_MS: u32 = 3_600_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SloClass {
    pub name: String,
    /// Time to first token; `None`: best effort.
    pub ttft_ms: Option<u32>,
    /// Time per output token after the first; `None`: best effort.
    pub itl_ms: Option<u32>,
}

impl SloClass {
    /// `NAME`, `NAME:ttft=MS`, `NAME:itl=MS` or `NAME:ttft=MS,itl=MS`.
    pub fn parse(spec: &str) -> Result<SloClass, String> {
        let (name, targets) = spec.split_once(':').unwrap_or((spec, ""));
        check_name(name)?;
        let mut class = SloClass {
            name: name.to_owned(),
            ttft_ms: None,
            itl_ms: None,
        };
        for part in targets.split(',').filter(|p| !p.trim().is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not ttft=MS or itl=MS"))?;
            let ms: u32 = value
                .trim()
                .parse()
                .ok()
                .filter(|&ms| (1..=MAX_TARGET_MS).contains(&ms))
                .ok_or_else(|| {
                    format!("`{value}` is not a whole number of ms from 1 to {MAX_TARGET_MS}")
                })?;
            let slot = match key.trim() {
                "ttft" => &mut class.ttft_ms,
                "itl" => &mut class.itl_ms,
                other => return Err(format!("unknown target `{other}` (ttft or itl)")),
            };
            if slot.replace(ms).is_some() {
                return Err(format!("`{}` is given twice", key.trim()));
            }
        }
        Ok(class)
    }

    /// Whether every target of `self` is at least as loose as `other`'s.
    fn no_tighter_than(&self, other: &SloClass) -> bool {
        let loose = |t: Option<u32>| t.unwrap_or(u32::MAX);
        loose(self.ttft_ms) >= loose(other.ttft_ms) && loose(self.itl_ms) >= loose(other.itl_ms)
    }

    /// Whether a finished sequence met each target: (ttft, itl). A sequence that never
    /// produced a token met neither; one token alone has no inter-token gap to miss.
    pub fn attained(&self, completion: &Completion) -> (bool, bool) {
        let t = &completion.timings;
        let Some(first) = t.first_token else {
            return (self.ttft_ms.is_none(), self.itl_ms.is_none());
        };
        let ttft = self
            .ttft_ms
            .is_none_or(|ms| first.as_secs_f64() * 1e3 <= f64::from(ms));
        let tokens = completion.usage.completion_tokens;
        let itl = self.itl_ms.is_none_or(|ms| {
            tokens < 2 || {
                let per_token =
                    (t.finished.saturating_sub(first)).as_secs_f64() * 1e3 / (tokens - 1) as f64;
                per_token <= f64::from(ms)
            }
        });
        (ttft, itl)
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a class name (1 to {MAX_NAME_LEN} of A-Z a-z 0-9 _ - .)"
        ))
    }
}

/// The classes a server defines.
#[derive(Debug, Clone, Default)]
pub struct SloClasses {
    classes: BTreeMap<String, Arc<SloClass>>,
    default: Option<String>,
}

impl SloClasses {
    pub fn new(classes: Vec<SloClass>, default: Option<String>) -> Result<SloClasses, String> {
        let mut map = BTreeMap::new();
        for class in classes {
            let name = class.name.clone();
            if map.insert(name.clone(), Arc::new(class)).is_some() {
                return Err(format!("class `{name}` is defined twice"));
            }
        }
        if let Some(name) = &default {
            if !map.contains_key(name) {
                return Err(format!("the default class `{name}` is not defined"));
            }
        }
        Ok(SloClasses {
            classes: map,
            default,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<SloClass>> {
        self.classes.values()
    }

    /// A class a request names must exist (checked before admission, so a typo costs nothing).
    pub fn check_asked(&self, asked: Option<&str>) -> Result<(), ApiError> {
        match asked {
            Some(name) if !self.classes.contains_key(name) => Err(ApiError::invalid(
                "slo_class",
                format!(
                    "unknown slo_class `{}`; this server defines: {}",
                    name.chars().take(MAX_NAME_LEN).collect::<String>(),
                    self.names()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The class a request runs under (see the module doc); `tenant` is the gateway's name
    /// for the caller's class, which may name no defined class.
    pub fn resolve(&self, asked: Option<&str>, tenant: Option<&str>) -> Option<Arc<SloClass>> {
        let base = tenant
            .and_then(|name| self.classes.get(name))
            .or_else(|| self.default.as_ref().and_then(|d| self.classes.get(d)));
        let asked = asked.and_then(|name| self.classes.get(name));
        match (asked, base) {
            (Some(asked), Some(base)) if !asked.no_tighter_than(base) => Some(base.clone()),
            (Some(asked), _) => Some(asked.clone()),
            (None, base) => base.cloned(),
        }
    }

    fn names(&self) -> String {
        if self.classes.is_empty() {
            return "none".into();
        }
        self.classes.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagoda_runtime::{FinishReason, Timings, Usage};
    use std::time::Duration;

    fn classes() -> SloClasses {
        SloClasses::new(
            vec![
                SloClass::parse("interactive:ttft=1000,itl=100").unwrap(),
                SloClass::parse("standard:ttft=5000,itl=300").unwrap(),
                SloClass::parse("batch").unwrap(),
            ],
            Some("standard".into()),
        )
        .unwrap()
    }

    fn name(class: Option<Arc<SloClass>>) -> Option<String> {
        class.map(|c| c.name.clone())
    }

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        let c = SloClass::parse("interactive:ttft=1000,itl=100").unwrap();
        assert_eq!((c.ttft_ms, c.itl_ms), (Some(1000), Some(100)));
        let c = SloClass::parse("batch").unwrap();
        assert_eq!((c.ttft_ms, c.itl_ms), (None, None));
        for bad in [
            "",
            ":itl=5",
            "a b",
            "x:itl=0",
            "x:itl=-5",
            "x:itl=NaN",
            "x:itl=99999999999",
            "x:tpot=5",
            "x:itl",
            "x:itl=5,itl=6",
        ] {
            assert!(SloClass::parse(bad).is_err(), "{bad:?}");
        }
        assert!(SloClass::parse(&"x".repeat(65)).is_err());
        let dup = vec![SloClass::parse("a").unwrap(), SloClass::parse("a").unwrap()];
        assert!(SloClasses::new(dup, None).is_err());
        assert!(SloClasses::new(vec![], Some("a".into())).is_err());
    }

    #[test]
    fn a_request_may_relax_its_class_but_not_tighten_it() {
        let c = classes();
        assert_eq!(name(c.resolve(None, None)).as_deref(), Some("standard"));
        assert_eq!(
            name(c.resolve(Some("batch"), None)).as_deref(),
            Some("batch")
        );
        // Tighter than the default: the default stands.
        assert_eq!(
            name(c.resolve(Some("interactive"), None)).as_deref(),
            Some("standard")
        );
        // An interactive tenant may ask for anything looser.
        let tenant = Some("interactive");
        assert_eq!(
            name(c.resolve(Some("interactive"), tenant)).as_deref(),
            Some("interactive")
        );
        assert_eq!(
            name(c.resolve(None, tenant)).as_deref(),
            Some("interactive")
        );
        assert_eq!(
            name(c.resolve(Some("batch"), tenant)).as_deref(),
            Some("batch")
        );
        // A tenant class that names no defined class falls back to the default.
        assert_eq!(
            name(c.resolve(None, Some("gold"))).as_deref(),
            Some("standard")
        );
        assert!(c.check_asked(Some("gold")).is_err());
        assert!(c.check_asked(Some("batch")).is_ok());
        let none = SloClasses::default();
        assert_eq!(name(none.resolve(None, Some("interactive"))), None);
    }

    fn completion(first_ms: Option<u64>, finished_ms: u64, tokens: usize) -> Completion {
        Completion {
            finish_reason: FinishReason::Length,
            usage: Usage {
                completion_tokens: tokens,
                ..Usage::default()
            },
            timings: Timings {
                queued: Duration::ZERO,
                first_token: first_ms.map(Duration::from_millis),
                finished: Duration::from_millis(finished_ms),
                compute: Duration::ZERO,
                steps_waited: 0,
            },
            error: None,
            cause: Default::default(),
        }
    }

    #[test]
    fn attainment_uses_ttft_and_time_per_output_token() {
        let c = SloClass::parse("i:ttft=1000,itl=100").unwrap();
        // 900 ms to the first token, then 10 tokens in 900 ms: 100 ms each.
        assert_eq!(c.attained(&completion(Some(900), 1800, 10)), (true, true));
        assert_eq!(c.attained(&completion(Some(1100), 2000, 10)), (false, true));
        assert_eq!(c.attained(&completion(Some(500), 1500, 10)), (true, false));
        assert_eq!(c.attained(&completion(Some(500), 500, 1)), (true, true));
        assert_eq!(c.attained(&completion(None, 500, 0)), (false, false));
        let batch = SloClass::parse("b").unwrap();
        assert_eq!(batch.attained(&completion(None, 500, 0)), (true, true));
    }
}
