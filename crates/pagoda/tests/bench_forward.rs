//! `pagoda bench forward` on the tiny fixture: warm-up runs go before the measured ones and
//! the report holds positive rates; a warm-up count that is not a number is a clear error.

use std::path::PathBuf;
use std::process::Command;

fn bench(extra: &[&str]) -> std::process::Output {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tiny-qwen2");
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(["bench", "forward", "--model"])
        .arg(model)
        .args(["--prompt-len", "12", "--gen", "3", "--json"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn warm_up_runs_are_not_reported_and_rates_are_positive() {
    for warmup in ["0", "2"] {
        let out = bench(&["--warmup", warmup, "--repeats", "2"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "--warmup {warmup}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
        assert_eq!(lines.len(), 1, "one report per batch size: {stdout}");
        let report: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        for key in ["prefill_tokens_per_s", "decode_tokens_per_s"] {
            let rate = report[key].as_f64().unwrap();
            assert!(rate.is_finite() && rate > 0.0, "{key} = {rate}");
        }
    }
}

#[test]
fn a_warm_up_count_that_is_not_a_number_is_refused() {
    let out = bench(&["--warmup", "several"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--warmup") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
