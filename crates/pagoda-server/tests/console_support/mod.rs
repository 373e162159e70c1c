//! Reports written by the real tools into a console's reports folder: `bench serve` (JSON
//! and its SVG plots), `bench profile` and its goodput search against the test server,
//! `plan --out` from that profile, and a red-team run against the obedient target saved as
//! `redteam --out` saves it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use clap::Parser;
use pagoda_bench::cli::{PlanArgs, ProfileArgs, ServeArgs};
use pagoda_redteam::{builtin, RunConfig, SavedReport};

#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

#[derive(Parser)]
struct Profile {
    #[command(flatten)]
    args: ProfileArgs,
}

#[derive(Parser)]
struct Plan {
    #[command(flatten)]
    args: PlanArgs,
}

/// The bench commands build their own runtime: run them on the blocking pool, so the
/// in-process server keeps serving on the test's.
async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// Writes every kind of report into `dir`; `base` is the test server, `key` a tenant's key.
pub async fn save_reports(base: &str, key: &str, model: &str, dir: &Path) {
    let endpoint = [
        "--base-url",
        base,
        "--api-key",
        key,
        "--model",
        model,
        "--no-progress",
    ];
    let out_dir = dir.display().to_string();
    let mut argv = vec!["serve"];
    argv.extend_from_slice(&endpoint);
    argv.extend_from_slice(&["--concurrency", "1,2", "--num-requests", "4"]);
    argv.extend_from_slice(&[
        "--input-len",
        "8",
        "--output-len",
        "4",
        "--out-dir",
        &out_dir,
    ]);
    let serve = Serve::parse_from(argv).args;
    off_thread(move || pagoda_bench::run_serve(serve))
        .await
        .unwrap();

    let profile_path = path(dir, "profile.json");
    let mut argv = vec!["profile"];
    argv.extend_from_slice(&endpoint);
    argv.extend_from_slice(&["--concurrency", "1,2", "--saturation-concurrency", "2"]);
    argv.extend_from_slice(&["--num-requests", "2", "--warmup", "0"]);
    argv.extend_from_slice(&["--input-len", "8", "--output-len", "4"]);
    argv.extend_from_slice(&["--prefill-input-len", "16", "--decode-output-len", "4"]);
    argv.extend_from_slice(&["--output", &profile_path]);
    let profile = Profile::parse_from(argv).args;
    off_thread(move || pagoda_bench::run_profile(profile))
        .await
        .unwrap();

    // The goodput search, at two rates under limits any run meets.
    let mut argv = vec!["profile"];
    argv.extend_from_slice(&endpoint);
    argv.extend_from_slice(&["--slo-ttft-ms", "60000", "--slo-itl-ms", "60000"]);
    argv.extend_from_slice(&["--rate-min", "4", "--rate-max", "8", "--search-steps", "0"]);
    argv.extend_from_slice(&["--num-requests", "3", "--warmup", "0"]);
    argv.extend_from_slice(&[
        "--input-len",
        "8",
        "--output-len",
        "4",
        "--out-dir",
        &out_dir,
    ]);
    let search = Profile::parse_from(argv).args;
    off_thread(move || pagoda_bench::run_profile(search))
        .await
        .unwrap();

    let plan_path = path(dir, "plan.json");
    let plan = Plan::parse_from([
        "plan",
        "--profile",
        &profile_path,
        "--qps",
        "50",
        "--input",
        "8",
        "--output",
        "4",
        "--cache-hit",
        "0.25",
        "--out",
        &plan_path,
    ])
    .args;
    pagoda_bench::run_plan(plan).unwrap();

    save_redteam(dir).await;
}

/// A run of the built-in packs against the obedient target (every attack succeeds), saved
/// as `redteam.json`, and an older report of another pack that the console must not pick.
async fn save_redteam(dir: &Path) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(pagoda_redteam::obedient::serve(listener, None));
    let config = RunConfig {
        target,
        api_key: None,
        model: None,
        repeats: 1,
        max_tokens: 64,
    };
    let report = pagoda_redteam::run(&config, &builtin()).await.unwrap();
    let older: PathBuf = dir.join("old-redteam.json");
    SavedReport::new("old-pack.yaml", report.clone())
        .write(&older)
        .unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&older)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    SavedReport::new("builtin", report)
        .write(&dir.join("redteam.json"))
        .unwrap();
}
