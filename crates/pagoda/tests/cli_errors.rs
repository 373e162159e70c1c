//! Bad input to `pagoda generate` gives one clear error line and a non-zero exit, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models")
        .join(name)
}

/// A writable copy of a fixture model to break.
fn copy_model(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// Runs `pagoda generate` on `model` and returns (exit ok, stdout, stderr).
fn generate(model: &Path, extra: &[&str]) -> (bool, String, String) {
    generate_prompt(model, "The old pagoda", extra)
}

fn generate_prompt(model: &Path, prompt: &str, extra: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(["generate", "--model"])
        .arg(model)
        .args([
            "--prompt",
            prompt,
            "--max-tokens",
            "4",
            "--temperature",
            "0",
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_clean_failure(result: (bool, String, String), expect: &[&str]) {
    let (ok, _, stderr) = result;
    assert!(!ok, "should fail");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line expected: {stderr}");
    for needle in expect {
        assert!(lines[0].contains(needle), "{needle:?} not in {stderr}");
    }
}

#[test]
fn greedy_json_output_is_reproducible() {
    let first = generate(&fixture("tiny-qwen3"), &["--json"]);
    let second = generate(&fixture("tiny-qwen3"), &["--json"]);
    assert!(first.0, "{}", first.2);
    assert_eq!(first.1, second.1);
    let json: serde_json::Value = serde_json::from_str(first.1.trim()).unwrap();
    assert_eq!(json["token_ids"].as_array().unwrap().len(), 4);
    assert!(json["prompt_tokens"].as_u64().unwrap() > 1);
}

#[test]
fn wrong_path_is_reported() {
    assert_clean_failure(
        generate(Path::new("/no/such/model"), &[]),
        &["/no/such/model"],
    );
}

#[test]
fn truncated_safetensors_is_reported() {
    let dir = copy_model("tiny-qwen2");
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    assert_clean_failure(
        generate(dir.path(), &[]),
        &["model.safetensors", "not a valid safetensors"],
    );
}

#[test]
fn garbage_safetensors_header_is_reported() {
    let dir = copy_model("tiny-qwen2");
    std::fs::write(
        dir.path().join("model.safetensors"),
        b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header",
    )
    .unwrap();
    assert_clean_failure(generate(dir.path(), &[]), &["model.safetensors"]);
}

#[test]
fn pickled_weights_are_refused_with_the_reason() {
    let dir = copy_model("tiny-qwen2");
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    std::fs::write(dir.path().join("pytorch_model.bin"), b"PK\x03\x04pickle").unwrap();
    assert_clean_failure(
        generate(dir.path(), &[]),
        &["pytorch_model.bin", "safetensors", "arbitrary code"],
    );
}

#[test]
fn missing_and_out_of_range_config_fields_are_named() {
    let dir = copy_model("tiny-qwen2");
    let path = dir.path().join("config.json");
    let original = std::fs::read_to_string(&path).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&original).unwrap();
    config.as_object_mut().unwrap().remove("num_hidden_layers");
    std::fs::write(&path, config.to_string()).unwrap();
    assert_clean_failure(generate(dir.path(), &[]), &["num_hidden_layers", "missing"]);

    let mut config: serde_json::Value = serde_json::from_str(&original).unwrap();
    config["num_key_value_heads"] = 3.into();
    std::fs::write(&path, config.to_string()).unwrap();
    assert_clean_failure(generate(dir.path(), &[]), &["num_key_value_heads"]);

    std::fs::write(&path, "{not json").unwrap();
    assert_clean_failure(generate(dir.path(), &[]), &["config.json"]);
}

#[test]
fn a_tensor_with_the_wrong_shape_is_named() {
    let dir = copy_model("tiny-qwen2");
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["intermediate_size"] = 300.into();
    std::fs::write(&path, config.to_string()).unwrap();
    assert_clean_failure(
        generate(dir.path(), &[]),
        &["model.layers.0.mlp.gate_proj.weight", "shape"],
    );
}

#[test]
fn a_prompt_longer_than_the_context_is_refused() {
    let long = "pagoda ".repeat(400);
    assert_clean_failure(
        generate_prompt(&fixture("tiny-qwen2"), &long, &["--max-model-len", "64"]),
        &["maximum context length is 64"],
    );
}

#[test]
fn a_kv_budget_too_small_for_one_sequence_is_refused() {
    assert_clean_failure(
        generate(&fixture("tiny-qwen2"), &["--kv-cache-memory", "64KiB"]),
        &["KV cache", "--kv-cache-memory"],
    );
}

#[test]
fn a_bad_kernel_path_is_one_error_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .env("PAGODA_KERNELS", "sse9")
        .args(["generate", "--model"])
        .arg(fixture("tiny-llama"))
        .args(["--prompt", "x", "--max-tokens", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_clean_failure(
        (out.status.success(), String::new(), stderr),
        &[
            "PAGODA_KERNELS=sse9",
            "scalar, avx2, avx2-vnni, avx512, avx512-vnni, avx512-amx",
        ],
    );
}

/// A split GGUF (gguf-split's shards, here in a directory of their own) generates what the
/// file it was cut from generates; with a shard missing, one line names it.
#[test]
fn a_split_gguf_generates_as_the_whole_file() {
    let whole = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gguf/tiny-qwen2-kquants.gguf");
    let file = pagoda_gguf::GgufFile::open(&whole).unwrap();
    let tensors = file.tensors_to_write();
    let dir = tempfile::tempdir().unwrap();
    let shares = [5, tensors.len() - 5];
    for (no, bytes) in pagoda_gguf::split_gguf_bytes(&file.metadata, &tensors, &shares)
        .into_iter()
        .enumerate()
    {
        let name = pagoda_gguf::shard_file_name("tiny-q4_k_m", no, shares.len());
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let tokens = |model: &Path| {
        let (ok, stdout, stderr) = generate(model, &["--json"]);
        assert!(ok, "{}: {stderr}", model.display());
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["token_ids"].clone()
    };
    let want = tokens(&whole);
    assert_eq!(want.as_array().map(Vec::len), Some(4));
    assert_eq!(tokens(dir.path()), want);
    let second = dir.path().join("tiny-q4_k_m-00002-of-00002.gguf");
    assert_eq!(tokens(&second), want);
    std::fs::remove_file(&second).unwrap();
    assert_clean_failure(
        generate(&dir.path().join("tiny-q4_k_m-00001-of-00002.gguf"), &[]),
        &["tiny-q4_k_m-00002-of-00002.gguf", "is not there"],
    );
}

/// Greedy tokens of `pagoda generate --json` on `model` with `extra` flags, on every kernel
/// path this CPU has (forced through the environment): all the same, `max_tokens` of them.
fn same_tokens_on_every_kernel_path(model: &Path, extra: &[&str], max_tokens: usize) {
    let run = |isa: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
            .env("PAGODA_KERNELS", isa)
            .args(["generate", "--model"])
            .arg(model)
            .args([
                "--prompt",
                "The old pagoda stood",
                "--temperature",
                "0",
                "--json",
            ])
            .args(["--max-tokens", &max_tokens.to_string()])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{isa}: {stderr}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["token_ids"].clone()
    };
    let want = run("scalar");
    assert_eq!(want.as_array().map(Vec::len), Some(max_tokens));
    for isa in pagoda_models::Isa::supported() {
        assert_eq!(run(isa.name()), want, "{isa} {extra:?}");
    }
}

#[test]
fn every_kernel_path_generates_the_same_tokens() {
    same_tokens_on_every_kernel_path(&fixture("tiny-qwen2"), &[], 12);
}

/// A quantized file gives the same tokens on every kernel path with the default products
/// (int8) and with `--quant-dot exact` (how they differ is checked in pagoda-models' gguf
/// tests).
#[test]
fn quantized_products_generate_the_same_tokens_on_every_kernel_path() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/gguf/tiny-qwen2-kquants.gguf");
    same_tokens_on_every_kernel_path(&model, &[], 8);
    same_tokens_on_every_kernel_path(&model, &["--quant-dot", "exact"], 8);
}
