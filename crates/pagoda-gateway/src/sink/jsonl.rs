//! A JSON-lines file, one event per line, for debugging and piping into other tools.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::batcher::{Batcher, Message, SinkHealth};
use crate::error::GatewayError;
use crate::event::CostEvent;
use crate::usage::{Aggregator, EventFigures, UsageQuery, UsageRow};

pub struct JsonlSink {
    path: PathBuf,
    batcher: Batcher,
}

impl JsonlSink {
    pub fn open(path: &Path) -> Result<JsonlSink, GatewayError> {
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        let batcher = Batcher::start("metering-jsonl", move |events| {
            write_lines(&mut file, events).map_err(|e| e.to_string())
        });
        Ok(JsonlSink {
            path: path.to_path_buf(),
            batcher,
        })
    }

    pub fn send(&self, message: Message) {
        self.batcher.send(message);
    }

    pub fn health(&self) -> &SinkHealth {
        self.batcher.health()
    }

    pub fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
        let mut agg = Aggregator::default();
        for event in read_events(&self.path)? {
            agg.add(query, figures(&event));
        }
        Ok(agg.finish())
    }
}

pub fn write_lines(file: &mut File, events: &[CostEvent]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(events.len() * 400);
    for e in events {
        serde_json::to_writer(&mut buf, e)?;
        buf.push(b'\n');
    }
    file.write_all(&buf)?;
    file.flush()
}

/// Every complete line of the file; a torn last line (a crash mid-write) is skipped.
pub fn read_events(path: &Path) -> Result<Vec<CostEvent>, GatewayError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Ok(event) = serde_json::from_str::<CostEvent>(&line) {
            out.push(event);
        }
    }
    Ok(out)
}

pub fn figures(e: &CostEvent) -> EventFigures<'_> {
    EventFigures {
        tenant: e.tenant.as_str(),
        model: &e.model,
        ts_ms: e.ts_ms,
        prompt_tokens: e.prompt_tokens,
        cached_tokens: e.cached_tokens,
        completion_tokens: e.completion_tokens,
        cost: e.cost,
        compute_ms: e.compute_ms,
    }
}
