//! Per-class SLO attainment on `/metrics`: finished sequences per class and how many met each
//! target, so that attainment is `attained / requests` over any window (`rate()` of both).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use pagoda_runtime::Completion;

use crate::metrics::{header, number};
use crate::slo::{SloClass, SloClasses};

#[derive(Default, Clone, Copy)]
struct Counts {
    requests: u64,
    ttft: u64,
    itl: u64,
    both: u64,
}

/// Counts per class; every defined class is listed from the start, at zero.
#[derive(Default)]
pub struct SloCounters {
    classes: Mutex<BTreeMap<String, (Arc<SloClass>, Counts)>>,
}

impl SloCounters {
    pub fn register(&self, classes: &SloClasses) {
        let mut map = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        for class in classes.iter() {
            map.entry(class.name.clone())
                .or_insert_with(|| (class.clone(), Counts::default()));
        }
    }

    pub fn observe(&self, class: &Arc<SloClass>, completion: &Completion) {
        let (ttft, itl) = class.attained(completion);
        let mut map = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        let (_, counts) = map
            .entry(class.name.clone())
            .or_insert_with(|| (class.clone(), Counts::default()));
        counts.requests += 1;
        counts.ttft += u64::from(ttft);
        counts.itl += u64::from(itl);
        counts.both += u64::from(ttft && itl);
    }

    pub fn render(&self, out: &mut String, label: &str) {
        let map = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if map.is_empty() {
            return;
        }
        header(
            out,
            "pagoda:slo_target_seconds",
            "Latency targets of each SLO class (ttft: to the first token; itl: per output token after it).",
            "gauge",
        );
        for (name, (class, _)) in map.iter() {
            for (target, ms) in [("ttft", class.ttft_ms), ("itl", class.itl_ms)] {
                if let Some(ms) = ms {
                    let seconds = number(f64::from(ms) / 1e3);
                    let _ = writeln!(
                        out,
                        "pagoda:slo_target_seconds{{{label},slo_class=\"{name}\",target=\"{target}\"}} {seconds}"
                    );
                }
            }
        }
        header(
            out,
            "pagoda:slo_requests",
            "Finished sequences per SLO class.",
            "counter",
        );
        for (name, (_, counts)) in map.iter() {
            let _ = writeln!(
                out,
                "pagoda:slo_requests_total{{{label},slo_class=\"{name}\"}} {}",
                counts.requests
            );
        }
        header(
            out,
            "pagoda:slo_attained",
            "Finished sequences that met their class's targets: ttft, itl, or both (a class without a target meets it).",
            "counter",
        );
        for (name, (_, c)) in map.iter() {
            for (target, value) in [("ttft", c.ttft), ("itl", c.itl), ("both", c.both)] {
                let _ = writeln!(
                    out,
                    "pagoda:slo_attained_total{{{label},slo_class=\"{name}\",target=\"{target}\"}} {value}"
                );
            }
        }
    }
}
