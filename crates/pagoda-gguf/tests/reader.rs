//! The reader on the committed fixtures, and on every way a file from the internet can be
//! cut short or lie about its sizes: an error naming the file, never a panic or a huge
//! allocation.

use std::path::{Path, PathBuf};

use pagoda_gguf::{gguf_bytes, GgufError, GgufFile, TensorToWrite, TensorType};

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
        let tensors: Vec<TensorToWrite> = file
            .tensors()
            .map(|t| TensorToWrite {
                name: t.name.clone(),
                dims: t.dims.clone(),
                type_id: t.tensor_type.id(),
                bytes: file.tensor_bytes(t).unwrap().to_vec(),
            })
            .collect();
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
