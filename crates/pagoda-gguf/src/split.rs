//! Split GGUF files, as llama.cpp's `gguf-split` writes them: `NAME-00001-of-00003.gguf` and
//! its siblings in one directory. The first shard holds the model's metadata; every shard
//! holds a share of the tensors (the first may hold none) and the three `split.*` keys.

use std::path::{Path, PathBuf};

pub const SPLIT_NO: &str = "split.no";
pub const SPLIT_COUNT: &str = "split.count";
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// Shards are numbered with five digits.
const MAX_SHARDS: usize = 99_999;

/// The name of shard `no` (counted from 0) of `count`: `prefix-NNNNN-of-MMMMM.gguf`.
pub fn shard_file_name(prefix: &str, no: usize, count: usize) -> String {
    format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1)
}

/// A shard's file name as `(prefix, no counted from 0, count)`; `None` for other names.
pub fn parse_shard_name(file_name: &str) -> Option<(&str, usize, usize)> {
    let stem = file_name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let five_digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if prefix.is_empty() || !five_digits(no) || !five_digits(count) {
        return None;
    }
    let (no, count): (usize, usize) = (no.parse().ok()?, count.parse().ok()?);
    (1..=count).contains(&no).then(|| (prefix, no - 1, count))
}

/// The paths of all `count` shards of the set `path` belongs to, first first, or why not.
pub(crate) fn shard_paths(path: &Path, no: usize, count: usize) -> Result<Vec<PathBuf>, String> {
    if count > MAX_SHARDS {
        return Err(format!(
            "{SPLIT_COUNT} is {count}, more than gguf-split's {MAX_SHARDS}"
        ));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some((prefix, named_no, named_count)) = parse_shard_name(name) else {
        return Err(format!(
            "it is shard {} of a split GGUF of {count}, but its name does not end in -{:05}-of-{count:05}.gguf, so its siblings cannot be found",
            no + 1,
            no + 1
        ));
    };
    if (named_no, named_count) != (no, count) {
        return Err(format!(
            "its name says shard {} of {named_count}, its metadata shard {} of {count}",
            named_no + 1,
            no + 1
        ));
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    Ok((0..count)
        .map(|i| dir.join(shard_file_name(prefix, i, count)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_read_back_as_written() {
        let name = shard_file_name("qwen2.5-7b-instruct-q4_k_m", 1, 3);
        assert_eq!(name, "qwen2.5-7b-instruct-q4_k_m-00002-of-00003.gguf");
        assert_eq!(
            parse_shard_name(&name),
            Some(("qwen2.5-7b-instruct-q4_k_m", 1, 3))
        );
        for other in [
            "model.gguf",
            "model-00000-of-00003.gguf",
            "model-00004-of-00003.gguf",
            "model-0001-of-0003.gguf",
            "-00001-of-00002.gguf",
            "model-00001-of-00002.bin",
        ] {
            assert_eq!(parse_shard_name(other), None, "{other}");
        }
    }

    #[test]
    fn siblings_are_named_from_the_shard_given() {
        let paths = shard_paths(Path::new("/m/x-00002-of-00002.gguf"), 1, 2).unwrap();
        assert_eq!(
            paths,
            [
                PathBuf::from("/m/x-00001-of-00002.gguf"),
                PathBuf::from("/m/x-00002-of-00002.gguf")
            ]
        );
        let wrong = shard_paths(Path::new("/m/x-00001-of-00002.gguf"), 0, 3).unwrap_err();
        assert!(wrong.contains("shard 1 of 2"), "{wrong}");
        let renamed = shard_paths(Path::new("/m/x.gguf"), 0, 2).unwrap_err();
        assert!(renamed.contains("-00001-of-00002.gguf"), "{renamed}");
    }
}
