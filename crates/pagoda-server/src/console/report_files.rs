//! The reports folder (`--console-reports-dir`), read defensively: only plain files directly
//! inside it whose names are letters, digits, `.`, `_` and `-` and end in `.json` or `.svg`.
//! Links are neither listed nor followed (also when one is swapped in between the check and
//! the open), subfolders are ignored, and every read is capped.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Largest JSON report read; the tools write a few kilobytes per load level.
pub const MAX_JSON_BYTES: u64 = 4 << 20;
/// Largest SVG plot served.
pub const MAX_SVG_BYTES: u64 = 8 << 20;
/// Files of each kind listed, newest first; older ones are counted, not read.
pub const MAX_LISTED: usize = 100;
const MAX_NAME: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Json,
    Svg,
}

/// The kind of a file name the console may read, or `None` for any other name (a path, a
/// hidden file, `..`, characters that would need escaping in a URL).
pub fn kind_of(name: &str) -> Option<FileKind> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.contains("..");
    if !plain {
        return None;
    }
    if name.ends_with(".json") {
        Some(FileKind::Json)
    } else if name.ends_with(".svg") {
        Some(FileKind::Svg)
    } else {
        None
    }
}

/// A report or plot found in the folder.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub kind: FileKind,
    pub modified_ms: Option<i64>,
}

/// What the folder holds, newest first.
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<Entry>,
    /// `.json`/`.svg` entries left out: links, non-plain files, names outside the rule.
    pub refused: usize,
    /// Plain files left out because `MAX_LISTED` newer ones of their kind were listed.
    pub older: usize,
}

impl Listing {
    pub fn of_kind(&self, kind: FileKind) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }

    pub fn has(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.name == name)
    }
}

fn looks_like_report(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".svg")
}

pub fn list(dir: &Path) -> std::io::Result<Listing> {
    let mut listing = Listing::default();
    for item in std::fs::read_dir(dir)? {
        let Ok(item) = item else {
            continue;
        };
        let name = item.file_name();
        let Some(name) = name.to_str() else {
            listing.refused += 1; // Not UTF-8: surely not a name the tools wrote.
            continue;
        };
        // DirEntry::metadata does not follow links, so a link is seen as one.
        let meta = item.metadata();
        let kind = kind_of(name);
        match (kind, meta) {
            (Some(kind), Ok(meta)) if meta.file_type().is_file() => listing.entries.push(Entry {
                name: name.to_string(),
                kind,
                modified_ms: modified_ms(&meta),
            }),
            _ if looks_like_report(name) => listing.refused += 1,
            _ => {}
        }
    }
    listing.entries.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| a.name.cmp(&b.name))
    });
    for kind in [FileKind::Json, FileKind::Svg] {
        let mut seen = 0;
        listing.entries.retain(|e| {
            if e.kind != kind {
                return true;
            }
            seen += 1;
            seen <= MAX_LISTED
        });
        listing.older += seen.saturating_sub(MAX_LISTED);
    }
    Ok(listing)
}

fn modified_ms(meta: &std::fs::Metadata) -> Option<i64> {
    let since = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

#[derive(Debug)]
pub enum ReadError {
    /// No such plain file (a link or folder of that name counts as none).
    Missing,
    TooLarge {
        limit: u64,
    },
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Missing => write!(f, "no such file"),
            ReadError::TooLarge { limit } => write!(f, "larger than {} MiB", limit >> 20),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO swapped in after the check must not hang the read.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// The bytes of `name` (already checked with `kind_of`) in `dir`, at most `limit` of them.
pub fn read(dir: &Path, name: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
    if kind_of(name).is_none() {
        return Err(ReadError::Missing);
    }
    let path = dir.join(name);
    let missing = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::Missing,
        _ => ReadError::Io(e),
    };
    let meta = std::fs::symlink_metadata(&path).map_err(missing)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::Missing);
    }
    let file = open_no_follow(&path).map_err(|e| match e.raw_os_error() {
        #[cfg(unix)]
        Some(libc::ELOOP) => ReadError::Missing, // A link swapped in after the check.
        _ => missing(e),
    })?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::Missing);
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit }); // It grew while being read.
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_report_names_are_accepted() {
        assert_eq!(kind_of("bench.json"), Some(FileKind::Json));
        assert_eq!(kind_of("run-1_a.latency_cdf.svg"), Some(FileKind::Svg));
        for bad in [
            "",
            ".json",
            ".hidden.json",
            "../bench.json",
            "a/../b.json",
            "a/b.json",
            "/etc/passwd.json",
            "a\\b.json",
            "a..json",
            "bench.json ",
            "bench.jsonl",
            "bench.SVG",
            "bén.json",
            "a%2fb.json",
        ] {
            assert_eq!(kind_of(bad), None, "{bad:?}");
        }
        assert_eq!(kind_of(&format!("{}.json", "a".repeat(200))), None);
    }

    #[cfg(unix)]
    #[test]
    fn links_and_folders_are_neither_listed_nor_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.json"), "{}").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bench.json"), "{}").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.json"),
            dir.path().join("link.json"),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("sub.json")).unwrap();
        let listing = list(dir.path()).unwrap();
        let names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["bench.json"]);
        assert_eq!(listing.refused, 2);
        assert!(matches!(
            read(dir.path(), "link.json", 100),
            Err(ReadError::Missing)
        ));
        assert!(matches!(
            read(dir.path(), "sub.json", 100),
            Err(ReadError::Missing)
        ));
        assert_eq!(read(dir.path(), "bench.json", 100).unwrap(), b"{}");
        assert!(matches!(
            read(dir.path(), "bench.json", 1),
            Err(ReadError::TooLarge { .. })
        ));
    }
}
