//! The ClickHouse sink's local spool: every event is appended here (and acknowledged) before
//! it is shipped, and a small offset file says how far ClickHouse has confirmed. After a
//! crash or while ClickHouse is unreachable the unconfirmed tail is simply shipped again;
//! the table deduplicates on the event id, so shipping an event twice never counts it twice.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::GatewayError;
use crate::event::CostEvent;

pub struct Spool {
    dir: PathBuf,
    file: Mutex<File>,
}

impl Spool {
    pub fn open(dir: &Path) -> Result<Spool, GatewayError> {
        std::fs::create_dir_all(dir)?;
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(dir.join("events.jsonl"))?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn append(&self, events: &[CostEvent]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(events.len() * 400);
        for e in events {
            serde_json::to_writer(&mut buf, e)?;
            buf.push(b'\n');
        }
        let mut file = self.lock();
        file.write_all(&buf)?;
        file.flush()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.lock().metadata().map_or(0, |m| m.len())
    }

    /// How far ClickHouse has confirmed.
    pub fn confirmed(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("confirmed"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Records that everything before `offset` is in ClickHouse; once everything is, the
    /// spool starts over empty so it does not grow forever.
    pub fn confirm(&self, offset: u64) -> std::io::Result<()> {
        let file = self.lock();
        let offset = if file.metadata()?.len() == offset {
            file.set_len(0)?;
            0
        } else {
            offset
        };
        let tmp = self.dir.join("confirmed.tmp");
        std::fs::write(&tmp, offset.to_string())?;
        std::fs::rename(tmp, self.dir.join("confirmed"))
    }

    /// Up to `max` complete events from `offset`, and the offset after them.
    pub fn read(&self, offset: u64, max: usize) -> std::io::Result<(Vec<CostEvent>, u64)> {
        let mut bytes = Vec::new();
        {
            let mut file = self.lock();
            let len = file.metadata()?.len();
            if offset >= len {
                return Ok((Vec::new(), offset.min(len)));
            }
            file.seek(SeekFrom::Start(offset))?;
            (&mut *file)
                .take((len - offset).min(64 << 20))
                .read_to_end(&mut bytes)?;
        }
        let mut events = Vec::new();
        let mut end = 0usize;
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            if events.len() >= max || line.last() != Some(&b'\n') {
                break;
            }
            end += line.len();
            // A line that does not parse (a torn write before a crash) is skipped.
            if let Ok(e) = serde_json::from_slice::<CostEvent>(line) {
                events.push(e);
            }
        }
        Ok((events, offset + end as u64))
    }
}
