//! Adversarial inputs cost work in proportion to their length. Work is counted (regex
//! searches started, bytes validated, digit-group ranges tried), not timed, so the test is
//! exact on any machine; `examples/scan_throughput.rs` measures the time.

use pagoda_guard::PiiScanner;

fn adversarial(kind: &str, len: usize) -> String {
    let unit = match kind {
        "digits" => "4111111111111112".to_string(),
        "spaced_digits" => "4 1 1 1 ".to_string(),
        "at_signs" => "a@".to_string(),
        "dotted" => "1.2.3.".to_string(),
        "colons" => "a:b:".to_string(),
        "near_card" => "4111 1111 1111 1112 ".to_string(),
        "iban_like" => "GB00 WEST ".to_string(),
        "base64ish" => "QUFBQUFBQUFB".to_string(),
        _ => unreachable!(),
    };
    unit.repeat(len / unit.len() + 1)[..len].to_string()
}

#[test]
fn pii_scan_work_grows_linearly_on_adversarial_inputs() {
    let scanner = PiiScanner::new();
    for kind in [
        "digits",
        "spaced_digits",
        "at_signs",
        "dotted",
        "colons",
        "near_card",
        "iban_like",
        "base64ish",
    ] {
        let small = scanner
            .scan_counted(&adversarial(kind, 64 * 1024))
            .1
            .total();
        let large = scanner
            .scan_counted(&adversarial(kind, 256 * 1024))
            .1
            .total();
        let ratio = large as f64 / small.max(1) as f64;
        println!("{kind:<14} work 64K={small} 256K={large} ratio={ratio:.2}");
        assert!(ratio < 4.4, "{kind}: 4x input cost {ratio:.2}x work");
        // And the constant is small: a few units of work per byte at most.
        assert!(large < 256 * 1024 * 64, "{kind}: {large} units for 256 KiB");
    }
}
