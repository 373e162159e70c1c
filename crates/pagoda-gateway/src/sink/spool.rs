//! The ClickHouse sink's local spool: every event is appended here (and acknowledged) before
//! it is shipped, and a small position file says how far ClickHouse has confirmed. After a
//! crash or while ClickHouse is unreachable the unconfirmed tail is simply shipped again;
//! the table deduplicates on the event id, so shipping an event twice never counts it twice.
//!
//! The spool is a sequence of generation files (`events-<gen>.jsonl`) so that it can start
//! over without ever truncating a file the position still points into. Once everything of
//! the current generation is confirmed (the position file, replaced by write, sync and
//! rename, says so): (1) appends move to a new, empty generation; (2) the position file is
//! replaced to point at the new generation's start; (3) the old file is deleted. A crash after any step leaves a state `open` reads
//! back without losing or skipping an event: after (1) the reader finds its generation done
//! and a later one present, and moves on; after (2) the stale file is deleted at open. A
//! position past the end of its file (which no crash produces) is never taken as "shipped":
//! that generation is shipped again from its start.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::GatewayError;
use crate::event::CostEvent;

/// Where the shipper is: a generation and a byte offset in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub generation: u64,
    pub offset: u64,
}

struct Files {
    /// The generation appends go to, and its file.
    generation: u64,
    file: File,
    /// How far ClickHouse has confirmed.
    confirmed: Position,
}

pub struct Spool {
    dir: PathBuf,
    files: Mutex<Files>,
}

impl Spool {
    pub fn open(dir: &Path) -> Result<Spool, GatewayError> {
        std::fs::create_dir_all(dir)?;
        migrate_single_file(dir)?;
        let generations = generations(dir)?;
        let mut confirmed = read_position(dir);
        if !generations.contains(&confirmed.generation) {
            // Its file is gone (or was never written): the next generation left, if any,
            // from its start.
            if let Some(&next) = generations.iter().find(|&&g| g > confirmed.generation) {
                confirmed = Position {
                    generation: next,
                    offset: 0,
                };
            }
        }
        // Older generations were confirmed whole before the position moved past them.
        for &g in generations.iter().filter(|&&g| g < confirmed.generation) {
            std::fs::remove_file(gen_path(dir, g))?;
        }
        let newest = generations.last().copied().unwrap_or(0);
        let generation = newest.max(confirmed.generation);
        let file = open_gen(dir, generation)?;
        let spool = Spool {
            dir: dir.to_path_buf(),
            files: Mutex::new(Files {
                generation,
                file,
                confirmed,
            }),
        };
        spool.check_position()?;
        Ok(spool)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A confirmed offset beyond its file's end means the position cannot be trusted: the
    /// generation is shipped again from its start.
    fn check_position(&self) -> std::io::Result<()> {
        let mut files = self.lock();
        let len = file_len(&self.dir, files.confirmed.generation)?;
        if files.confirmed.offset > len {
            tracing::warn!(
                generation = files.confirmed.generation,
                offset = files.confirmed.offset,
                len,
                "the spool's position is past its file; shipping that file again"
            );
            files.confirmed.offset = 0;
            write_position(&self.dir, files.confirmed)?;
        }
        Ok(())
    }

    pub fn append(&self, events: &[CostEvent]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(events.len() * 400);
        for e in events {
            serde_json::to_writer(&mut buf, e)?;
            buf.push(b'\n');
        }
        let mut files = self.lock();
        files.file.write_all(&buf)?;
        files.file.flush()
    }

    /// Everything appended so far has been confirmed.
    pub fn all_confirmed(&self) -> bool {
        let files = self.lock();
        let len = files.file.metadata().map_or(u64::MAX, |m| m.len());
        files.confirmed
            >= Position {
                generation: files.generation,
                offset: len,
            }
    }

    /// Up to `max` complete events after the confirmed position, and the position after
    /// them; `None` when there is nothing to ship.
    pub fn pending(&self, max: usize) -> std::io::Result<Option<(Vec<CostEvent>, Position)>> {
        let mut files = self.lock();
        let mut at = files.confirmed;
        loop {
            let len = file_len(&self.dir, at.generation)?;
            if at.offset < len || at.generation >= files.generation {
                break;
            }
            // This generation is done and a later one exists (a crash between rotation
            // steps): move on, for good, and finish the rotation.
            let done = at.generation;
            at = Position {
                generation: done + 1,
                offset: 0,
            };
            files.confirmed = at;
            write_position(&self.dir, at)?;
            match std::fs::remove_file(gen_path(&self.dir, done)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        drop(files);
        let (events, end) = read_from(&gen_path(&self.dir, at.generation), at.offset, max)?;
        if end == at.offset {
            return Ok(None);
        }
        let to = Position {
            generation: at.generation,
            offset: end,
        };
        Ok(Some((events, to)))
    }

    /// Records that everything before `to` is in ClickHouse; once all of the current
    /// generation is, appends move to a fresh one and the old file goes.
    pub fn confirm(&self, to: Position) -> std::io::Result<()> {
        self.confirm_until(to, RotationStep::Done)
    }

    /// `confirm`, stopping after `last` as a crash would (the tests' kill points).
    fn confirm_until(&self, to: Position, last: RotationStep) -> std::io::Result<()> {
        let mut files = self.lock();
        files.confirmed = to;
        write_position(&self.dir, to)?;
        let len = files.file.metadata()?.len();
        if to.generation != files.generation || to.offset != len || len == 0 {
            return Ok(());
        }
        let next = files.generation + 1;
        files.file = open_gen(&self.dir, next)?;
        files.generation = next;
        if last == RotationStep::NewGeneration {
            return Ok(());
        }
        files.confirmed = Position {
            generation: next,
            offset: 0,
        };
        write_position(&self.dir, files.confirmed)?;
        if last == RotationStep::Position {
            return Ok(());
        }
        std::fs::remove_file(gen_path(&self.dir, to.generation))
    }
}

/// The steps of starting a new generation, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RotationStep {
    NewGeneration,
    Position,
    Done,
}

#[cfg(test)]
impl Spool {
    fn confirm_and_die_after(&self, to: Position, last: RotationStep) {
        self.confirm_until(to, last).unwrap();
    }
}

fn gen_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("events-{generation}.jsonl"))
}

fn open_gen(dir: &Path, generation: u64) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(gen_path(dir, generation))
}

fn file_len(dir: &Path, generation: u64) -> std::io::Result<u64> {
    match std::fs::metadata(gen_path(dir, generation)) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The generations present, oldest first.
fn generations(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(g) = name
            .strip_prefix("events-")
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|n| n.parse().ok())
        {
            out.push(g);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The position file: `GENERATION OFFSET`; absent means the start of generation 0.
fn read_position(dir: &Path) -> Position {
    let text = std::fs::read_to_string(dir.join("confirmed")).unwrap_or_default();
    let mut parts = text.split_whitespace().map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(generation), Some(offset)) => Position { generation, offset },
        _ => Position::default(),
    }
}

/// Replaces the position file atomically and durably.
fn write_position(dir: &Path, p: Position) -> std::io::Result<()> {
    let tmp = dir.join("confirmed.tmp");
    let mut f = File::create(&tmp)?;
    write!(f, "{} {}", p.generation, p.offset)?;
    f.sync_all()?;
    std::fs::rename(tmp, dir.join("confirmed"))?;
    File::open(dir)?.sync_all()
}

/// Spools written before generations (`events.jsonl`, a bare offset in `confirmed`) become
/// generation 0.
fn migrate_single_file(dir: &Path) -> std::io::Result<()> {
    let old = dir.join("events.jsonl");
    if !old.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(dir.join("confirmed")).unwrap_or_default();
    if let Ok(offset) = text.trim().parse::<u64>() {
        write_position(
            dir,
            Position {
                generation: 0,
                offset,
            },
        )?;
    }
    std::fs::rename(old, gen_path(dir, 0))
}

/// Up to `max` complete events from `offset` of `path`, and the offset after them.
fn read_from(path: &Path, offset: u64, max: usize) -> std::io::Result<(Vec<CostEvent>, u64)> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if offset >= len {
        return Ok((Vec::new(), offset));
    }
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(offset))?;
    file.take((len - offset).min(64 << 20))
        .read_to_end(&mut bytes)?;
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::event::test_event;

    fn events(from: u64, n: u64) -> Vec<CostEvent> {
        (from..from + n).map(test_event).collect()
    }

    /// Ships everything pending, counting each event id.
    fn ship_all(spool: &Spool, shipped: &mut BTreeMap<u64, usize>) {
        while let Some((batch, to)) = spool.pending(2).unwrap() {
            for e in batch {
                *shipped.entry(e.prompt_tokens).or_default() += 1;
            }
            spool.confirm(to).unwrap();
        }
    }

    /// Kills the process (drops the spool) after each step of a rotation, then restarts and
    /// appends more: every event is shipped, none skipped, and the spool ends empty.
    #[test]
    fn a_crash_at_any_rotation_step_loses_nothing() {
        for last in [
            RotationStep::NewGeneration,
            RotationStep::Position,
            RotationStep::Done,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut shipped = BTreeMap::new();
            let spool = Spool::open(dir.path()).unwrap();
            spool.append(&events(0, 3)).unwrap();
            let (batch, to) = spool.pending(10).unwrap().unwrap();
            assert_eq!(batch.len(), 3);
            for e in batch {
                *shipped.entry(e.prompt_tokens).or_default() += 1;
            }
            spool.confirm_and_die_after(to, last);
            drop(spool);
            let spool = Spool::open(dir.path()).unwrap();
            spool.append(&events(3, 4)).unwrap();
            ship_all(&spool, &mut shipped);
            assert_eq!(
                shipped.keys().copied().collect::<Vec<_>>(),
                (0..7).collect::<Vec<_>>(),
                "{last:?}"
            );
            assert!(shipped.values().all(|&n| n == 1), "{last:?}: {shipped:?}");
            assert!(spool.all_confirmed());
            drop(spool);
            let files = generations(dir.path()).unwrap();
            assert_eq!(files.len(), 1, "{last:?}: stale generations {files:?}");
        }
    }

    #[test]
    fn a_position_past_the_end_ships_the_file_again_instead_of_skipping_it() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path()).unwrap();
        spool.append(&events(0, 2)).unwrap();
        drop(spool);
        write_position(
            dir.path(),
            Position {
                generation: 0,
                offset: 1 << 30,
            },
        )
        .unwrap();
        let spool = Spool::open(dir.path()).unwrap();
        let mut shipped = BTreeMap::new();
        ship_all(&spool, &mut shipped);
        assert_eq!(shipped.len(), 2);
    }

    #[test]
    fn a_spool_from_before_generations_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for e in events(0, 3) {
            text.push_str(&serde_json::to_string(&e).unwrap());
            text.push('\n');
        }
        let first_line = text.lines().next().unwrap().len() + 1;
        std::fs::write(dir.path().join("events.jsonl"), &text).unwrap();
        std::fs::write(dir.path().join("confirmed"), first_line.to_string()).unwrap();
        let spool = Spool::open(dir.path()).unwrap();
        let mut shipped = BTreeMap::new();
        ship_all(&spool, &mut shipped);
        assert_eq!(shipped.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    }
}
