//! The reader on the committed fixtures, and on every way a file from the internet can be
//! cut short or lie about its sizes: an error naming the file, never a panic or a huge
//! allocation.

use std::path::{Path, PathBuf};

use pagoda_gguf::{
    gguf_bytes, shard_file_name, split_gguf_bytes, GgufError, GgufFile, MetaValue, TensorType,
    SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS_COUNT,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gguf")
        .join(name)
}

fn write_temp(tag: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pagoda-gguf-{}-{tag}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn fixtures_open_with_their_metadata_and_tensors() {
    let file = GgufFile::open(&fixture("tiny-qwen2-kquants.gguf")).unwrap();
    assert_eq!(file.version, 3);
    assert_eq!(file.architecture(), Some("qwen2"));
    assert_eq!(file.get_u64("qwen2.embedding_length"), Some(256));
    assert_eq!(
        file.get_strings("tokenizer.ggml.tokens")
            .unwrap()
            .unwrap()
            .len(),
        1024
    );
    let embed = file.tensor("token_embd.weight").unwrap();
    assert_eq!(embed.tensor_type, TensorType::Q6K);
    assert_eq!(embed.shape(), [1024, 256]);
    assert_eq!(file.tensor_bytes(embed).unwrap().len(), 1024 * 210);
    assert!(GgufFile::is_gguf(&fixture("quant-blocks.gguf")));
    assert!(!GgufFile::is_gguf(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("Cargo.toml")
            .as_path()
    ));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = std::fs::read(fixture("tiny-mistral-q8_0.gguf")).unwrap();
    let mut cuts: Vec<usize> = (0..4096).step_by(7).collect();
    cuts.extend((4096..bytes.len()).step_by(9973));
    cuts.push(bytes.len() - 1);
    let path = write_temp("cut", &[]);
    for cut in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        match GgufFile::open(&path) {
            Err(GgufError::NotGguf { .. } | GgufError::Malformed { .. }) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn counts_larger_than_the_file_are_refused_before_allocating() {
    let mut bytes = std::fs::read(fixture("tiny-qwen2-f16.gguf")).unwrap();
    // Header: magic, version (u32), tensor count (u64), metadata count (u64).
    for at in [8, 16] {
        let mut lying = bytes.clone();
        lying[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let path = write_temp(&format!("count{at}"), &lying);
        let err = GgufFile::open(&path).unwrap_err().to_string();
        assert!(err.contains("larger than the file"), "{err}");
        std::fs::remove_file(path).unwrap();
    }
    // A version Pagoda does not read.
    bytes[4..8].copy_from_slice(&9u32.to_le_bytes());
    let path = write_temp("version", &bytes);
    assert!(matches!(
        GgufFile::open(&path),
        Err(GgufError::UnsupportedVersion { version: 9, .. })
    ));
    std::fs::remove_file(path).unwrap();
}

#[test]
fn written_files_read_back_as_the_fixtures_they_copy() {
    for name in [
        "tiny-qwen2-kquants.gguf",
        "tiny-mistral-q8_0.gguf",
        "quant-blocks.gguf",
    ] {
        let file = GgufFile::open(&fixture(name)).unwrap();
        let tensors = file.tensors_to_write();
        let copy =
            GgufFile::open(&write_temp("copy", &gguf_bytes(&file.metadata, &tensors))).unwrap();
        assert_eq!(copy.metadata, file.metadata, "{name}");
        assert_eq!(copy.tensors().count(), tensors.len(), "{name}");
        for t in file.tensors() {
            let c = copy.tensor(&t.name).unwrap();
            assert_eq!((&c.dims, c.tensor_type), (&t.dims, t.tensor_type), "{name}");
            assert_eq!(
                copy.tensor_bytes(c),
                file.tensor_bytes(t),
                "{name} {}",
                t.name
            );
            assert_eq!(TensorType::from_id(t.tensor_type.id()), t.tensor_type);
        }
    }
}

/// A fresh directory for one split set.
fn split_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pagoda-gguf-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_shards(dir: &Path, prefix: &str, shards: &[Vec<u8>]) -> Vec<PathBuf> {
    shards
        .iter()
        .enumerate()
        .map(|(no, bytes)| {
            let path = dir.join(shard_file_name(prefix, no, shards.len()));
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect()
}

#[test]
fn a_split_set_opens_as_the_file_it_was_cut_from() {
    let whole = GgufFile::open(&fixture("tiny-qwen2-kquants.gguf")).unwrap();
    let tensors = whole.tensors_to_write();
    // The first shard holds only metadata, as `gguf-split --no-tensor-in-metadata` writes it.
    let shares = [0, 10, tensors.len() - 10];
    let dir = split_dir("split");
    let paths = write_shards(
        &dir,
        "tiny",
        &split_gguf_bytes(&whole.metadata, &tensors, &shares),
    );
    assert_eq!(
        paths[1].file_name().unwrap(),
        "tiny-00002-of-00003.gguf",
        "gguf-split's names"
    );
    for given in &paths {
        let split = GgufFile::open(given).unwrap();
        assert_eq!(split.path, paths[0], "named by its first shard");
        assert_eq!(split.shard_paths(), paths.as_slice());
        let mut metadata = split.metadata.clone();
        assert_eq!(metadata.remove(SPLIT_COUNT).unwrap().as_u64(), Some(3));
        assert_eq!(metadata.remove(SPLIT_NO).unwrap().as_u64(), Some(0));
        assert_eq!(
            metadata.remove(SPLIT_TENSORS_COUNT).unwrap().as_u64(),
            Some(tensors.len() as u64)
        );
        assert_eq!(metadata, whole.metadata);
        assert_eq!(split.tensors().count(), tensors.len());
        for t in whole.tensors() {
            let s = split.tensor(&t.name).unwrap();
            assert_eq!((&s.dims, s.tensor_type), (&t.dims, t.tensor_type));
            assert_eq!(split.tensor_bytes(s), whole.tensor_bytes(t), "{}", t.name);
        }
        let mut in_shard = [0; 3];
        split.tensors().for_each(|t| in_shard[t.shard] += 1);
        assert_eq!(in_shard, shares);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn broken_split_sets_are_refused_with_the_reason() {
    let whole = GgufFile::open(&fixture("tiny-qwen3-q4_0.gguf")).unwrap();
    let tensors = whole.tensors_to_write();
    let n = tensors.len();
    let shards = split_gguf_bytes(&whole.metadata, &tensors, &[4, n - 8, 4]);
    let refused = |tag: &str, shards: &[Vec<u8>], open: usize| {
        let dir = split_dir(tag);
        let paths = write_shards(&dir, "m", shards);
        let err = GgufFile::open(&paths[open]).unwrap_err();
        std::fs::remove_dir_all(dir).unwrap();
        err
    };

    let dir = split_dir("missing");
    let paths = write_shards(&dir, "m", &shards);
    std::fs::remove_file(&paths[2]).unwrap();
    match GgufFile::open(&paths[0]).unwrap_err() {
        GgufError::MissingShard { missing, count, .. } => {
            assert_eq!((missing, count), (paths[2].clone(), 3));
        }
        other => panic!("{other}"),
    }
    // A shard renamed out of the set cannot name its siblings.
    let renamed = dir.join("renamed.gguf");
    std::fs::rename(&paths[1], &renamed).unwrap();
    let err = GgufFile::open(&renamed).unwrap_err().to_string();
    assert!(err.contains("-00002-of-00003.gguf"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();

    // A shard from another set (numbered as the second, in the third's place).
    let mut swapped = shards.clone();
    swapped[2] = shards[1].clone();
    let err = refused("swapped", &swapped, 0).to_string();
    assert!(err.contains("as shard 3 of 3"), "{err}");

    // The same tensor in two shards.
    let dup = split_gguf_bytes(
        &whole.metadata,
        &[tensors.clone(), tensors[..1].to_vec()].concat(),
        &[4, n - 8, 5],
    );
    let err = refused("dup", &dup, 1).to_string();
    assert!(err.contains("appears twice"), "{err}");

    // A count of tensors the shards do not hold (one shard dropped from a set of 2 + 1).
    let mut short = split_gguf_bytes(&whole.metadata, &tensors, &[4, n - 4]);
    let mut metadata = whole.metadata.clone();
    metadata.insert(SPLIT_NO.into(), MetaValue::U16(0));
    metadata.insert(SPLIT_COUNT.into(), MetaValue::U16(2));
    metadata.insert(SPLIT_TENSORS_COUNT.into(), MetaValue::I32(n as i32 + 1));
    short[0] = gguf_bytes(&metadata, &tensors[..4]);
    let err = refused("count", &short, 0).to_string();
    assert!(err.contains(&format!("hold {n} tensors")), "{err}");

    // Split keys that are no counts, or out of range.
    for (key, value) in [
        (SPLIT_COUNT, MetaValue::String("two".into())),
        (SPLIT_NO, MetaValue::I16(-1)),
        (SPLIT_NO, MetaValue::U16(7)),
        (SPLIT_COUNT, MetaValue::U64(1 << 40)),
    ] {
        let mut metadata = whole.metadata.clone();
        metadata.insert(key.into(), value.clone());
        if key == SPLIT_NO {
            metadata.insert(SPLIT_COUNT.into(), MetaValue::U16(3));
        }
        let path = write_temp("keys", &gguf_bytes(&metadata, &tensors));
        match GgufFile::open(&path) {
            Err(GgufError::Malformed { .. }) => {}
            other => panic!("{key} = {value:?}: {other:?}"),
        }
    }
}
