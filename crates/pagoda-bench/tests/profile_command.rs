//! `bench profile` against the mock server, and `plan` reading what it wrote.

mod common;

use clap::Parser;
use common::{plan_args, Fixture};
use pagoda_bench::cli::ProfileArgs;
use pagoda_bench::mock_server::MockServerConfig;
use pagoda_bench::profile_format::Profile;
use std::time::Duration;

#[derive(Parser)]
struct ProfileWrapper {
    #[command(flatten)]
    args: ProfileArgs,
}

#[test]
fn profile_measures_each_load_and_plan_reads_it() {
    let fixture = Fixture::start(MockServerConfig {
        ttft_cycle: vec![Duration::from_millis(20)],
        itl: Duration::from_millis(10),
        ..MockServerConfig::default()
    });
    let output = fixture.out_dir.path().join("profile.json");
    let base_url = fixture.server.base_url();
    let output_arg = output.display().to_string();
    let args = ProfileWrapper::parse_from([
        "profile",
        "--base-url",
        &base_url,
        "--no-progress",
        "--concurrency",
        "1,4",
        "--saturation-concurrency",
        "4",
        "--input-len",
        "32",
        "--output-len",
        "4",
        "--prefill-input-len",
        "64",
        "--decode-output-len",
        "4",
        "--num-requests",
        "8",
        "--warmup",
        "1",
        "--output",
        &output_arg,
    ])
    .args;
    let profile = pagoda_bench::profile::profile(args).unwrap();
    assert_eq!(Profile::read(&output).unwrap().loads.len(), 2);
    assert_eq!(profile.loads[0].concurrency, 1);
    assert_eq!(profile.loads[1].concurrency, 4);
    assert!(profile.prefill_tps > 0.0 && profile.decode_tps > 0.0);
    let itl = profile.loads[0].itl_ms.median;
    assert!((6.0..60.0).contains(&itl), "ITL median {itl}");
    assert!(profile.loads[0].ttft_ms.median >= 19.0);

    let plan = pagoda_bench::plan_command::run(&plan_args(&[
        "--profile",
        &output_arg,
        "--qps",
        "10",
        "--input",
        "32",
        "--output",
        "4",
        "--slo-ttft-ms",
        "5000",
        "--slo-itl-ms",
        "5000",
    ]))
    .unwrap();
    assert!(plan.prefill.replicas >= 1 && plan.decode.replicas >= 1);
    assert_eq!(plan.slo_load_concurrency, Some(4));
}
