//! The Kubernetes manifests under deploy/: every overlay renders with `kubectl kustomize`,
//! and what they say agrees with the binary and with each other: the flags exist, the TOML
//! files parse as the server and gateway read them, probes hit the health endpoint on the
//! container's port, selectors select the pods, and the scale-out objects point at them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents of a rendered overlay.
fn render(overlay: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join("deploy/overlays").join(overlay))
        .output()
        .expect("kubectl (Debian's package) renders the manifests");
    assert!(
        out.status.success(),
        "{overlay}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    of_kind(docs, kind)
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `selector` (a label map) is a subset of `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_mapping()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

fn serve_help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The Pagoda Deployment's container, after checks every overlay shares.
fn check_pagoda(docs: &[Value], overlay: &str, help: &str, dir: &Path) -> (Value, Value) {
    let deployment = named(docs, "Deployment", "pagoda");
    let pod = &deployment["spec"]["template"];
    let container = pod["spec"]["containers"][0].clone();
    let args = str_list(&container["args"]);
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{overlay}");
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{overlay}: pagoda serve has no {flag}"
        );
    }
    let port = &container["ports"][0];
    assert_eq!(port["name"], "http");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "http");
    assert!(container["livenessProbe"]["httpGet"]["path"].is_string());
    // The service selects the pods and targets the named port.
    let service = named(docs, "Service", "pagoda");
    assert!(
        selects(&service["spec"]["selector"], &pod["metadata"]["labels"]),
        "{overlay}: the Service selects no Pagoda pod"
    );
    assert!(selects(
        &deployment["spec"]["selector"]["matchLabels"],
        &pod["metadata"]["labels"]
    ));
    // The config file parses as `pagoda serve --config` reads it: the server gets as far as
    // looking for the model (overridden here with one that does not exist).
    let config = of_kind(docs, "ConfigMap")[0];
    for (name, text) in config["data"].as_mapping().unwrap() {
        let (name, text) = (name.as_str().unwrap(), text.as_str().unwrap());
        let path = dir.join(format!("{overlay}-{name}"));
        std::fs::write(&path, text).unwrap();
        match name {
            "pagoda.toml" => {
                let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
                    .args(["serve", "--config"])
                    .arg(&path)
                    .args(["--model", "/nonexistent-model", "--port", "0"])
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    stderr.contains("model not found"),
                    "{overlay}: {name} does not load: {stderr}"
                );
            }
            "gateway.toml" => {
                pagoda_gateway::Policy::from_toml(text)
                    .unwrap_or_else(|e| panic!("{overlay}: {name}: {e}"));
            }
            "guard.toml" => {
                pagoda_guard::Policies::from_toml(text)
                    .unwrap_or_else(|e| panic!("{overlay}: {name}: {e}"));
            }
            other => panic!("{overlay}: unexpected config file {other}"),
        }
    }
    (pod.clone(), container)
}

#[test]
fn every_overlay_renders_and_agrees_with_the_binary() {
    let help = serve_help();
    let dir = tempfile::tempdir().unwrap();
    for overlay in ["cpu", "multi-tenant", "llm-d"] {
        let docs = render(overlay);
        let (pod, container) = check_pagoda(&docs, overlay, &help, dir.path());
        let args = str_list(&container["args"]);
        match overlay {
            "multi-tenant" => {
                // What the gateway flags point at exists in the same overlay.
                let url = |flag: &str| {
                    let i = args.iter().position(|a| a == flag).unwrap();
                    args[i + 1].clone()
                };
                for (flag, service, port) in [
                    ("--redis-url", "pagoda-redis", 6379),
                    ("--metering-sink", "pagoda-clickhouse", 8123),
                ] {
                    assert!(url(flag).contains(&format!("//{service}:{port}")), "{flag}");
                    let s = named(&docs, "Service", service);
                    assert_eq!(s["spec"]["ports"][0]["port"], port);
                }
                let volumes = str_list(&Value::Sequence(
                    pod["spec"]["volumes"]
                        .as_sequence()
                        .unwrap()
                        .iter()
                        .map(|v| v["name"].clone())
                        .collect(),
                ));
                assert!(volumes.contains(&"gateway-data".to_string()));
                named(&docs, "PersistentVolumeClaim", "pagoda-gateway-data");
            }
            "llm-d" => {
                assert!(args.windows(2).any(|w| w == ["--metrics-compat", "vllm"]));
                let labels = &pod["metadata"]["labels"];
                assert_eq!(labels["llm-d.ai/engine-type"], "pagoda");
                let pool = named(&docs, "InferencePool", "pagoda");
                assert_eq!(pool["apiVersion"], "inference.networking.k8s.io/v1");
                assert!(selects(&pool["spec"]["selector"]["matchLabels"], labels));
                assert_eq!(
                    pool["spec"]["targetPorts"][0]["number"],
                    container["ports"][0]["containerPort"]
                );
                let scaled = named(&docs, "ScaledObject", "pagoda");
                assert_eq!(scaled["spec"]["scaleTargetRef"]["name"], "pagoda");
                let query = scaled["spec"]["triggers"][0]["metadata"]["query"]
                    .as_str()
                    .unwrap();
                assert!(query.contains("pagoda:num_requests_waiting"), "{query}");
            }
            _ => {}
        }
    }
}
