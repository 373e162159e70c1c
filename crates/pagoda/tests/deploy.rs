//! The Kubernetes manifests under deploy/: every overlay renders with `kubectl kustomize`,
//! and what they say agrees with the binary and with each other: the flags exist, the TOML
//! files parse as the server and gateway read them, probes hit the health endpoint on the
//! container's port, selectors select the pods, the ServiceMonitor scrapes the Service's port,
//! the model cache is a mounted volume, the scale-out objects point at them, and every object
//! of a built-in kind validates against the Kubernetes API schemas (`kubernetes-validate`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of a rendered overlay.
fn render_text(overlay: &str) -> String {
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
    String::from_utf8(out.stdout).unwrap()
}

fn parse(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|doc| serde_yaml_ng::from_str(doc).unwrap())
        .collect()
}

/// The Kubernetes version whose API schemas the manifests are validated against.
const KUBERNETES_VERSION: &str = "1.33.0";

/// Custom resources `kubernetes-validate` has no schema for (it knows built-in kinds only):
/// these, and only these, may be reported as having no schema.
const CUSTOM_RESOURCES: [(&str, &str); 3] = [
    ("ServiceMonitor", "monitoring.coreos.com/v1"),
    ("InferencePool", "inference.networking.k8s.io/v1"),
    ("ScaledObject", "keda.sh/v1alpha1"),
];

/// What `kubernetes-validate --strict` finds wrong with a rendered overlay: every document
/// must either pass against the API schemas of KUBERNETES_VERSION or be one of
/// CUSTOM_RESOURCES, skipped because no schema exists for it.
fn schema_problems(text: &str, name: &str, dir: &Path) -> Vec<String> {
    let path = dir.join(format!("{name}-rendered.yaml"));
    std::fs::write(&path, text).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["--kubernetes-version", KUBERNETES_VERSION, "--strict"])
        .arg(&path)
        .output()
        .expect("kubernetes-validate (pip, .ci/requirements.txt) validates the manifests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut problems: Vec<String> = stdout
        .lines()
        .filter(|l| !l.starts_with("INFO ") && !l.starts_with("WARN "))
        .map(String::from)
        .collect();
    if !out.status.success() {
        problems.push(format!(
            "exit {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let version = KUBERNETES_VERSION.rsplit_once('.').unwrap().0;
    for doc in parse(text) {
        let (kind, api) = (
            doc["kind"].as_str().unwrap(),
            doc["apiVersion"].as_str().unwrap(),
        );
        let resource = format!(
            "{}/{}",
            kind.to_lowercase(),
            doc["metadata"]["name"].as_str().unwrap()
        );
        let expected = if CUSTOM_RESOURCES.contains(&(kind, api)) {
            format!(
                "Couldn't find schema for kind {kind} with api version {api} for kubernetes version {version}"
            )
        } else {
            format!("passed for resource {resource} against version {version}")
        };
        if !stdout.lines().any(|l| l.ends_with(&expected)) {
            problems.push(format!("{resource} ({api}): no line ending `{expected}`"));
        }
    }
    let warned = stdout.lines().filter(|l| l.starts_with("WARN ")).count();
    let skippable = parse(text)
        .iter()
        .filter(|d| {
            CUSTOM_RESOURCES
                .iter()
                .any(|&(k, a)| d["kind"] == k && d["apiVersion"] == a)
        })
        .count();
    if warned != skippable {
        problems.push(format!(
            "{warned} warnings for {skippable} custom resources:\n{stdout}"
        ));
    }
    problems
}

/// What is wrong with how the ServiceMonitor scrapes the Pagoda Service.
fn monitoring_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = vec![];
    let monitor = named(docs, "ServiceMonitor", "pagoda");
    if monitor["apiVersion"] != "monitoring.coreos.com/v1" {
        problems.push(format!("apiVersion {:?}", monitor["apiVersion"]));
    }
    let selector = &monitor["spec"]["selector"]["matchLabels"];
    let selected: Vec<&str> = of_kind(docs, "Service")
        .into_iter()
        .filter(|s| selects(selector, &s["metadata"]["labels"]))
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    if selected != ["pagoda"] {
        problems.push(format!(
            "the selector picks the Services {selected:?}, not pagoda"
        ));
    }
    let service = named(docs, "Service", "pagoda");
    let ports: Vec<&Value> = service["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| &p["name"])
        .collect();
    let endpoints = monitor["spec"]["endpoints"].as_sequence();
    if endpoints.is_none_or(|e| e.is_empty()) {
        problems.push("no endpoints".into());
    }
    for endpoint in endpoints.into_iter().flatten() {
        if !ports.contains(&&endpoint["port"]) {
            problems.push(format!("the Service has no port {:?}", endpoint["port"]));
        }
        if endpoint["path"] != "/metrics" {
            problems.push(format!("path {:?}", endpoint["path"]));
        }
    }
    problems
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
/// The model `pagoda.toml` in the ConfigMap serves.
fn config_model(docs: &[Value]) -> String {
    let text = of_kind(docs, "ConfigMap")[0]["data"]["pagoda.toml"]
        .as_str()
        .unwrap();
    let config: toml::Table = toml::from_str(text).unwrap();
    config["model"].as_str().unwrap().to_string()
}

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
    // The model cache (HF_HOME, where hub downloads go) is a volume mounted there.
    let env = container["env"].as_sequence().unwrap();
    let hf_home = env
        .iter()
        .find(|e| e["name"] == "HF_HOME")
        .map(|e| &e["value"])
        .unwrap_or_else(|| panic!("{overlay}: no HF_HOME"));
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    let volumes = pod["spec"]["volumes"].as_sequence().unwrap();
    for mount in mounts {
        assert!(
            volumes.iter().any(|v| v["name"] == mount["name"]),
            "{overlay}: no volume {:?}",
            mount["name"]
        );
    }
    let cache = mounts
        .iter()
        .find(|m| &m["mountPath"] == hf_home)
        .unwrap_or_else(|| panic!("{overlay}: nothing mounted at HF_HOME {hf_home:?}"));
    let volume = volumes.iter().find(|v| v["name"] == cache["name"]).unwrap();
    assert!(
        volume["emptyDir"].is_mapping() || volume["persistentVolumeClaim"].is_mapping(),
        "{overlay}: the model cache is neither an emptyDir nor a claim: {volume:?}"
    );
    let problems = monitoring_problems(docs);
    assert!(
        problems.is_empty(),
        "{overlay}: ServiceMonitor: {problems:?}"
    );
    (pod.clone(), container)
}

#[test]
fn every_overlay_renders_and_agrees_with_the_binary() {
    let help = serve_help();
    let dir = tempfile::tempdir().unwrap();
    for overlay in ["cpu", "multi-tenant", "llm-d"] {
        let text = render_text(overlay);
        let problems = schema_problems(&text, overlay, dir.path());
        assert!(
            problems.is_empty(),
            "{overlay}: schema validation: {problems:#?}"
        );
        let docs = parse(&text);
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
                // KV events reach the picker's Service, under a topic naming this pod's
                // address (from the downward API) and the served model.
                let value = |flag: &str| {
                    let i = args.iter().position(|a| a == flag).unwrap();
                    args[i + 1].clone()
                };
                assert!(value("--kv-events-endpoint").starts_with("tcp://pagoda-epp:"));
                let topic = value("--kv-events-topic");
                let port = container["ports"][0]["containerPort"].as_u64().unwrap();
                let model = config_model(&docs);
                assert_eq!(topic, format!("kv@$(POD_IP):{port}@{model}"));
                let env = container["env"].as_sequence().unwrap();
                assert!(env.iter().any(|e| e["name"] == "POD_IP"
                    && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"));
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

/// The checks above can fail: a schema error, an unexpected kind without a schema, and a
/// ServiceMonitor pointing at a port or Service that is not there are all reported.
#[test]
fn the_checks_catch_broken_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let text = render_text("llm-d");
    assert_eq!(
        schema_problems(&text, "llm-d", dir.path()),
        Vec::<String>::new()
    );

    // A schema error in a built-in kind.
    let broken = text.replacen("  replicas: 2\n", "  replicas: \"two\"\n", 1);
    assert_ne!(broken, text);
    let problems = schema_problems(&broken, "replicas", dir.path());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("deployment/pagoda") && p.contains("replicas")),
        "{problems:#?}"
    );
    // A property the strict schemas do not know.
    let broken = text.replacen("  replicas: 2\n", "  replicas: 2\n  replica: 2\n", 1);
    assert!(!schema_problems(&broken, "unknown-field", dir.path()).is_empty());
    // A built-in kind under a wrong apiVersion has no schema: not skipped like a CRD.
    let broken = text.replacen("apiVersion: policy/v1\n", "apiVersion: policy/v2\n", 1);
    assert_ne!(broken, text);
    let problems = schema_problems(&broken, "api-version", dir.path());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("poddisruptionbudget/pagoda")),
        "{problems:#?}"
    );

    let docs = parse(&text);
    assert_eq!(monitoring_problems(&docs), Vec::<String>::new());
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut docs = docs.clone();
        let monitor = docs
            .iter_mut()
            .find(|d| d["kind"] == "ServiceMonitor")
            .unwrap();
        f(monitor);
        monitoring_problems(&docs)
    };
    let problems = edit(&|m| m["spec"]["endpoints"][0]["port"] = "metrics".into());
    assert!(
        problems.iter().any(|p| p.contains("no port")),
        "{problems:?}"
    );
    let problems = edit(&|m| {
        m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "other".into()
    });
    assert!(
        problems.iter().any(|p| p.contains("selector")),
        "{problems:?}"
    );
    let problems = edit(&|m| m["spec"]["endpoints"][0]["path"] = "/stats".into());
    assert!(problems.iter().any(|p| p.contains("path")), "{problems:?}");
}
