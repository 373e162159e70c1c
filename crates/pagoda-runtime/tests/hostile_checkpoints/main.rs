//! Checkpoints an operator may be handed: the committed fixtures rewritten with broken
//! metadata, configs, shapes, dtypes and values. Each must either fail to load with an error
//! or load and serve; no variant may panic a thread (the engine's own recovery would hide a
//! panic from the request, so a panic hook counts them) or leave a KV block in use.

mod gguf;
mod safetensors;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use pagoda_runtime::{EngineConfig, GenerateRequest, SamplingParams};

/// One change to a checkpoint.
pub type Edit<T> = Box<dyn Fn(&mut T)>;

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The panic hook is global: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("hostile-checkpoints")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What the variants did.
pub struct Tally {
    refused: usize,
    served: usize,
    failures: Vec<String>,
    _turn: MutexGuard<'static, ()>,
}

impl Tally {
    pub fn start() -> Tally {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let report = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let thread = std::thread::current().name().unwrap_or("?").to_string();
                PANICS.lock().unwrap().push(format!("[{thread}] {info}"));
                report(info);
            }));
        });
        Tally {
            refused: 0,
            served: 0,
            failures: Vec::new(),
            _turn: ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Applies each edit to a copy of `base`, writes it with `write` and serves it.
    pub fn serve_each<T: Clone>(
        &mut self,
        label: &str,
        base: &T,
        edits: impl IntoIterator<Item = (String, Edit<T>)>,
        write: impl Fn(&T) -> PathBuf,
    ) {
        for (what, edit) in edits {
            let mut checkpoint = base.clone();
            edit(&mut checkpoint);
            let path = write(&checkpoint);
            PANICS.lock().unwrap().clear();
            let result = std::panic::catch_unwind(|| try_serve(&path));
            match result {
                Ok(Ok(true)) => self.served += 1,
                Ok(Ok(false)) => self.refused += 1,
                Ok(Err(e)) => self.failures.push(format!("{label}, {what}: {e}")),
                Err(_) => {} // the hook has it
            }
            for panic in std::mem::take(&mut *PANICS.lock().unwrap()) {
                self.failures.push(format!("{label}, {what}: {panic}"));
            }
        }
    }

    pub fn check(self) {
        eprintln!("{} variants refused, {} served", self.refused, self.served);
        assert!(
            self.refused > 0 && self.served > 0,
            "the edits reach both outcomes"
        );
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// Starts an engine on `path` (false if it refuses); when it starts, a greedy and a sampled
/// request must each end (with tokens or an error) and leave no KV block in use.
fn try_serve(path: &Path) -> Result<bool, String> {
    let mut config = EngineConfig::new(path.to_path_buf());
    config.kv_cache_memory = 4 << 20;
    let Ok(engine) = pagoda_runtime::start(config) else {
        return Ok(false);
    };
    let prompt = engine
        .tokenizer()
        .encode("The pagoda 北京 😀 fn main() {}", false)
        .unwrap_or_default();
    let prompt = if prompt.is_empty() { vec![0] } else { prompt };
    for temperature in [0.0, 1.0] {
        let sampling = SamplingParams {
            temperature,
            top_p: 0.9,
            max_tokens: Some(3),
            ignore_eos: true,
            ..SamplingParams::default()
        };
        if let Ok(mut stream) = engine.submit(GenerateRequest::new(prompt.clone(), sampling)) {
            while let Some(out) = stream.blocking_next() {
                for id in &out.token_ids {
                    let _ = engine.tokenizer().decode(&[*id], false);
                }
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.num_in_flight() > 0 || engine.stats().num_used_blocks() > 0 {
        if Instant::now() > deadline {
            return Err(format!("blocks still in use: {:?}", engine.stats()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    engine.shutdown();
    engine.join();
    Ok(true)
}
