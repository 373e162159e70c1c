//! The engine loop on the tiny fixture models: continuous batching, preemption, prefix caching
//! and seeded sampling must never change what a request produces.

use std::path::PathBuf;

use pagoda_runtime::{
    EngineConfig, EngineHandle, FinishReason, GenerateRequest, RequestOutput, SamplingParams,
};

fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models")
        .join(name)
}

fn engine(name: &str, configure: impl FnOnce(&mut EngineConfig)) -> EngineHandle {
    let mut config = EngineConfig::new(model_dir(name));
    config.max_model_len = Some(512);
    config.kv_cache_memory = 16 << 20;
    configure(&mut config);
    pagoda_runtime::start(config).unwrap()
}

fn greedy(max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        max_tokens: Some(max_tokens),
        ignore_eos: true,
        ..SamplingParams::default()
    }
}

/// Prompts of mixed lengths made from the fixture tokenizer.
fn prompts(engine: &EngineHandle, count: usize) -> Vec<Vec<u32>> {
    let text =
        "The old pagoda stood at the top of the hill, and every morning the monks climbed its \
                steps to ring the bell. Travellers came from far away to hear it.";
    let all = engine.tokenizer().encode(text, false).unwrap();
    (0..count)
        .map(|i| all[..1 + (i * 7) % all.len()].to_vec())
        .collect()
}

struct Finished {
    token_ids: Vec<u32>,
    text: String,
    outputs: Vec<RequestOutput>,
}

fn collect(mut stream: pagoda_runtime::RequestStream) -> Finished {
    let mut outputs = Vec::new();
    while let Some(out) = stream.blocking_next() {
        outputs.push(out);
    }
    Finished {
        token_ids: outputs.iter().flat_map(|o| o.token_ids.clone()).collect(),
        text: outputs.iter().map(|o| o.text.as_str()).collect(),
        outputs,
    }
}

fn completion(f: &Finished) -> &pagoda_runtime::Completion {
    f.outputs
        .last()
        .and_then(|o| o.finished.as_ref())
        .expect("a final message")
}

fn wait_until_idle(engine: &EngineHandle) {
    for _ in 0..500 {
        if engine.num_in_flight() == 0 && engine.stats().num_used_blocks() == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("engine did not go idle: {:?}", engine.stats());
}

#[test]
fn sixteen_concurrent_greedy_requests_match_their_solo_runs() {
    let engine = engine("tiny-qwen2", |_| {});
    let prompts = prompts(&engine, 16);
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            collect(
                engine
                    .submit(GenerateRequest::new(p.clone(), greedy(24)))
                    .unwrap(),
            )
            .token_ids
        })
        .collect();
    let streams: Vec<_> = prompts
        .iter()
        .map(|p| {
            engine
                .submit(GenerateRequest::new(p.clone(), greedy(24)))
                .unwrap()
        })
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        let done = collect(stream);
        assert_eq!(done.token_ids, alone[i], "request {i}");
        assert_eq!(completion(&done).usage.completion_tokens, 24);
    }
    assert!(engine.stats().steps_total > 0);
    wait_until_idle(&engine);
}

#[test]
fn a_preempted_request_resumes_with_the_same_tokens() {
    // Room for 40 blocks of 16 tokens; six requests that each grow to 8 blocks cannot all run.
    let engine = engine("tiny-llama", |c| {
        c.max_model_len = Some(256);
        c.kv_cache_memory = 40 * 2 * 3 * 16 * 2 * 32 * 4;
    });
    let prompts: Vec<Vec<u32>> = prompts(&engine, 12).into_iter().skip(6).collect();
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            collect(
                engine
                    .submit(GenerateRequest::new(p.clone(), greedy(90)))
                    .unwrap(),
            )
            .token_ids
        })
        .collect();
    assert_eq!(engine.stats().preemptions_total, 0);
    let streams: Vec<_> = prompts
        .iter()
        .map(|p| {
            engine
                .submit(GenerateRequest::new(p.clone(), greedy(90)))
                .unwrap()
        })
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        assert_eq!(collect(stream).token_ids, alone[i], "request {i}");
    }
    assert!(
        engine.stats().preemptions_total > 0,
        "the test must force preemption"
    );
    wait_until_idle(&engine);
}

#[test]
fn a_shared_three_block_prefix_is_not_recomputed() {
    let warm_engine = engine("tiny-mistral", |_| {});
    let all = prompts(&warm_engine, 40)
        .into_iter()
        .max_by_key(|p| p.len())
        .unwrap();
    assert!(all.len() > 48 + 4);
    let first = all[..48 + 3].to_vec();
    let mut second = all[..48].to_vec();
    second.extend_from_slice(&all[all.len() - 4..]);

    let cold = engine("tiny-mistral", |c| c.enable_prefix_caching = false);
    let cold_run = collect(
        cold.submit(GenerateRequest::new(second.clone(), greedy(16)))
            .unwrap(),
    );
    assert_eq!(completion(&cold_run).usage.cached_tokens, 0);

    collect(
        warm_engine
            .submit(GenerateRequest::new(first, greedy(4)))
            .unwrap(),
    );
    let prompt_tokens_before = warm_engine.stats().prompt_tokens_total;
    let warm = collect(
        warm_engine
            .submit(GenerateRequest::new(second.clone(), greedy(16)))
            .unwrap(),
    );
    let usage = completion(&warm).usage;
    assert_eq!(usage.cached_tokens, 48);
    assert_eq!(usage.prompt_tokens, second.len());
    assert_eq!(
        warm_engine.stats().prompt_tokens_total - prompt_tokens_before,
        (second.len() - 48) as u64
    );
    assert_eq!(warm.token_ids, cold_run.token_ids);
}

#[test]
fn seeded_sampling_is_the_same_alone_and_batched() {
    let engine = engine("tiny-qwen3", |_| {});
    let sampling = |seed| SamplingParams {
        temperature: 0.9,
        top_p: 0.95,
        top_k: Some(50),
        seed: Some(seed),
        max_tokens: Some(20),
        ignore_eos: true,
        ..SamplingParams::default()
    };
    let prompts = prompts(&engine, 8);
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            collect(
                engine
                    .submit(GenerateRequest::new(p.clone(), sampling(i as u64)))
                    .unwrap(),
            )
            .token_ids
        })
        .collect();
    let streams: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            engine
                .submit(GenerateRequest::new(p.clone(), sampling(i as u64)))
                .unwrap()
        })
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        assert_eq!(collect(stream).token_ids, alone[i], "request {i}");
    }
    // Different seeds really sample differently.
    assert!(alone.windows(2).any(|w| w[0] != w[1]));
}

#[test]
fn stop_strings_end_the_text_and_are_not_returned() {
    let engine = engine("tiny-qwen2", |_| {});
    let prompt = prompts(&engine, 5).pop().unwrap();
    let full = collect(
        engine
            .submit(GenerateRequest::new(prompt.clone(), greedy(32)))
            .unwrap(),
    );
    // Stop at a piece of text from the middle of the greedy output.
    let chars: Vec<char> = full.text.chars().collect();
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 3].iter().collect();
    let expected_end = full.text.find(&stop).unwrap();
    let mut params = greedy(32);
    params.stop = vec![stop.clone()];
    let stopped = collect(engine.submit(GenerateRequest::new(prompt, params)).unwrap());
    assert_eq!(stopped.text, full.text[..expected_end]);
    assert_eq!(completion(&stopped).finish_reason, FinishReason::Stop);
    wait_until_idle(&engine);
}

#[test]
fn n_choices_share_the_prompt_and_differ_by_seed() {
    let engine = engine("tiny-qwen2", |_| {});
    let prompt = prompts(&engine, 4).pop().unwrap();
    let params = SamplingParams {
        temperature: 1.0,
        n: 3,
        seed: Some(11),
        max_tokens: Some(12),
        ignore_eos: true,
        ..SamplingParams::default()
    };
    let done = collect(engine.submit(GenerateRequest::new(prompt, params)).unwrap());
    let mut per_choice = vec![Vec::new(); 3];
    let mut finals = 0;
    for out in &done.outputs {
        per_choice[out.index].extend_from_slice(&out.token_ids);
        finals += out.finished.is_some() as usize;
    }
    assert_eq!(finals, 3);
    assert!(per_choice.iter().all(|c| c.len() == 12));
    assert!(per_choice[0] != per_choice[1] || per_choice[1] != per_choice[2]);
    wait_until_idle(&engine);
}

#[test]
fn dropping_the_stream_aborts_and_frees_blocks() {
    let engine = engine("tiny-qwen2", |_| {});
    let prompt = prompts(&engine, 10).pop().unwrap();
    let mut stream = engine
        .submit(GenerateRequest::new(prompt, greedy(400)))
        .unwrap();
    let first = stream.blocking_next().unwrap();
    assert_eq!(first.token_ids.len(), 1);
    assert!(engine.stats().num_used_blocks() > 0 || engine.num_in_flight() > 0);
    drop(stream);
    wait_until_idle(&engine);
}

#[test]
fn bad_requests_are_refused_before_queueing() {
    let engine = engine("tiny-qwen2", |c| c.max_model_len = Some(64));
    let too_long = GenerateRequest::new(vec![5; 60], greedy(10));
    let err = engine.submit(too_long).unwrap_err().to_string();
    assert!(
        err.contains("64") && err.contains("60") && err.contains("10"),
        "{err}"
    );
    let bad_token = GenerateRequest::new(vec![5, 999_999], greedy(1));
    assert!(engine
        .submit(bad_token)
        .unwrap_err()
        .to_string()
        .contains("999999"));
    let mut params = greedy(1);
    params.top_p = 1.5;
    let err = engine
        .submit(GenerateRequest::new(vec![5], params))
        .unwrap_err()
        .to_string();
    assert!(err.contains("top_p"), "{err}");
    let mut params = greedy(1);
    params.logit_bias.insert(5000, 1.0);
    let err = engine
        .submit(GenerateRequest::new(vec![5], params))
        .unwrap_err()
        .to_string();
    assert!(err.contains("logit_bias"), "{err}");
    let mut params = greedy(1);
    params.n = 5000;
    let err = engine
        .submit(GenerateRequest::new(vec![5], params))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`n`"), "{err}");
    assert_eq!(engine.num_in_flight(), 0);
}
