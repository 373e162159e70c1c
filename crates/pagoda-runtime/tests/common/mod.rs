//! Helpers shared by the runtime's recovery and tenant tests, on the tiny fixture models.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pagoda_runtime::{
    Completion, EngineConfig, EngineHandle, GenerateRequest, RequestOutput, RequestStream,
    SamplingParams, TenantKey,
};

pub fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models")
        .join(name)
}

pub fn engine(configure: impl FnOnce(&mut EngineConfig)) -> EngineHandle {
    let mut config = EngineConfig::new(model_dir("tiny-qwen2"));
    config.max_model_len = Some(512);
    config.kv_cache_memory = 16 << 20;
    configure(&mut config);
    pagoda_runtime::start(config).unwrap()
}

pub fn greedy(max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        max_tokens: Some(max_tokens),
        ignore_eos: true,
        ..SamplingParams::default()
    }
}

/// A short prompt from the fixture tokenizer.
pub fn prompt(engine: &EngineHandle) -> Vec<u32> {
    engine
        .tokenizer()
        .encode("The old pagoda stood at the top of the hill", false)
        .unwrap()
}

pub fn request(
    prompt: Vec<u32>,
    sampling: SamplingParams,
    tenant: Option<&str>,
) -> GenerateRequest {
    let mut request = GenerateRequest::new(prompt, sampling);
    request.tenant = tenant.map(TenantKey::new);
    request
}

pub struct Finished {
    pub outputs: Vec<RequestOutput>,
}

impl Finished {
    /// The final output's completion of choice `index`.
    pub fn completion(&self, index: usize) -> &Completion {
        self.outputs
            .iter()
            .filter(|o| o.index == index)
            .find_map(|o| o.finished.as_ref())
            .expect("every choice ends with a final output")
    }

    pub fn token_ids(&self, index: usize) -> Vec<u32> {
        self.outputs
            .iter()
            .filter(|o| o.index == index)
            .flat_map(|o| o.token_ids.clone())
            .collect()
    }
}

pub fn collect(mut stream: RequestStream) -> Finished {
    let mut outputs = Vec::new();
    while let Some(out) = stream.blocking_next() {
        outputs.push(out);
    }
    Finished { outputs }
}

/// Waits until nothing is in flight and no KV block is in use.
pub fn wait_until_idle(engine: &EngineHandle) {
    wait_for(engine, "go idle", |e| {
        e.num_in_flight() == 0 && e.stats().num_used_blocks() == 0
    });
}

pub fn wait_for(engine: &EngineHandle, what: &str, done: impl Fn(&EngineHandle) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done(engine) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("engine did not {what}: {:?}", engine.stats());
}
