//! The crate's single error type. Messages are written for the person running the CLI.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot write {path}: {source}")]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{path} is not valid JSON of the expected shape: {source}")]
    ParseJson {
        path: PathBuf,
        source: serde_json::Error,
    },

    #[error("cannot load tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },

    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),

    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),

    #[error("cannot start the mock server: {0}")]
    MockServer(std::io::Error),

    #[error("cannot draw plot {path}: {message}")]
    Plot { path: PathBuf, message: String },

    #[error("every request failed ({failed} of {sent}); first error: {first_error}")]
    AllRequestsFailed {
        sent: u64,
        failed: u64,
        first_error: String,
    },

    #[error(
        "the SLO (TTFT <= {slo_ttft_ms} ms and ITL <= {slo_itl_ms} ms for {}% of requests) is missed even at the lowest rate, {rate} req/s, where {}% met it",
        percent(*.target), percent(*.attainment)
    )]
    GoodputUnreachable {
        slo_ttft_ms: f64,
        slo_itl_ms: f64,
        target: f64,
        rate: f64,
        attainment: f64,
    },

    #[error("no profiled load meets the SLO (TTFT <= {slo_ttft_ms} ms, ITL <= {slo_itl_ms} ms at p{percentile}); even the lightest load measured is too slow")]
    SloUnreachable {
        slo_ttft_ms: f64,
        slo_itl_ms: f64,
        percentile: u8,
    },
}

/// A fraction as a percentage with at most one decimal: 0.9 -> "90", 0.999 -> "99.9".
pub fn percent(fraction: f64) -> String {
    format!("{}", (fraction * 1000.0).round() / 10.0)
}
