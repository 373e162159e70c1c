//! Shared fixtures: a mock server on its own runtime and serve arguments parsed like the CLI.

#![allow(dead_code)]

use clap::Parser;
use pagoda_bench::cli::{PlanArgs, ProfileArgs, ServeArgs};
use pagoda_bench::mock_server::{MockServer, MockServerConfig};
use std::time::Duration;

#[derive(Parser)]
struct ServeWrapper {
    #[command(flatten)]
    args: ServeArgs,
}

#[derive(Parser)]
struct ProfileWrapper {
    #[command(flatten)]
    args: ProfileArgs,
}

#[derive(Parser)]
struct PlanWrapper {
    #[command(flatten)]
    args: PlanArgs,
}

/// A mock server whose tasks run on their own runtime, so the synchronous `serve` entry
/// point can build its own runtime on the test thread.
pub struct Fixture {
    pub server: MockServer,
    pub out_dir: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

impl Fixture {
    pub fn start(config: MockServerConfig) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("test runtime");
        let server = runtime
            .block_on(MockServer::start(config))
            .expect("mock server starts");
        Self {
            server,
            out_dir: tempfile::tempdir().expect("temp dir"),
            _runtime: runtime,
        }
    }

    /// `bench serve` arguments against this server; `extra` as typed on the command line.
    pub fn serve_args(&self, extra: &[&str]) -> ServeArgs {
        let base_url = self.server.base_url();
        let out_dir = self.out_dir.path().display().to_string();
        let mut argv = vec![
            "serve",
            "--base-url",
            &base_url,
            "--out-dir",
            &out_dir,
            "--no-progress",
            "--input-len",
            "8",
        ];
        argv.extend_from_slice(extra);
        ServeWrapper::parse_from(argv).args
    }
}

impl Fixture {
    /// `bench profile` arguments against this server, writing into `out_dir`.
    pub fn profile_args(&self, extra: &[&str]) -> ProfileArgs {
        let base_url = self.server.base_url();
        let out_dir = self.out_dir.path().display().to_string();
        let mut argv = vec![
            "profile",
            "--base-url",
            &base_url,
            "--out-dir",
            &out_dir,
            "--no-progress",
        ];
        argv.extend_from_slice(extra);
        ProfileWrapper::parse_from(argv).args
    }
}

pub fn plan_args(flags: &[&str]) -> PlanArgs {
    let mut argv = vec!["plan"];
    argv.extend_from_slice(flags);
    PlanWrapper::parse_from(argv).args
}

pub fn ms(values: &[u64]) -> Vec<Duration> {
    values.iter().map(|&v| Duration::from_millis(v)).collect()
}
