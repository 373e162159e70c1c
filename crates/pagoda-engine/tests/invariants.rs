//! Property tests over random interleavings of submit, step, abort, finish and fork, driven by a
//! fake model that keeps a fake KV store: every step writes the scheduled tokens into their slots
//! and reads each request's whole context back through its block table, so a wrong block table,
//! slot mapping or prefix hit shows up as the wrong tokens (or another salt's tokens).

use pagoda_engine::kv_cache::{BlockHasher, BlockKey, ExtraKeys};
use pagoda_engine::{
    BlockHash, BlockId, CacheSalt, FinishReason, KvCacheEvent, NewRequest, RequestId,
    RequestStatus, SamplingParams, ScheduledBatch, Scheduler, SchedulerConfig, TenantKey, TokenId,
};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

const EOS: TokenId = 0;
const VOCAB: u64 = 40;
const SALTS: [Option<&str>; 3] = [None, Some("tenant-a"), Some("tenant-b")];
/// Tenants are assigned by request id, independently of salts, so fair sharing and
/// preemption between tenants run under every interleaving too.
const TENANTS: [Option<&str>; 3] = [None, Some("t1"), Some("t2")];

#[derive(Clone, Debug)]
enum Op {
    Submit {
        prefix_group: u8,
        prompt_len: usize,
        salt: usize,
        priority: i32,
        max_tokens: usize,
    },
    Step,
    Abort(usize),
    Finish(usize),
    Fork(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3, 1usize..30, 0usize..3, 0i32..3, 1usize..12).prop_map(
            |(prefix_group, prompt_len, salt, priority, max_tokens)| Op::Submit {
                prefix_group,
                prompt_len,
                salt,
                priority,
                max_tokens,
            }
        ),
        6 => Just(Op::Step),
        1 => (0usize..64).prop_map(Op::Abort),
        1 => (0usize..64).prop_map(Op::Finish),
        1 => (0usize..64).prop_map(Op::Fork),
    ]
}

fn config() -> impl Strategy<Value = SchedulerConfig> {
    (4usize..40, 1usize..6, 2usize..24, 6usize..30, any::<bool>()).prop_map(
        |(budget, max_num_seqs, chunk, num_blocks, enable_prefix_caching)| SchedulerConfig {
            max_num_batched_tokens: budget,
            max_num_seqs,
            max_prefill_chunk: chunk,
            block_size: 4,
            num_blocks,
            max_model_len: 48,
            enable_prefix_caching,
            sampling_seed: Some(1),
            ..SchedulerConfig::default()
        },
    )
}

/// Prompts of one group share their leading tokens, so prefix caching has work to do.
fn prompt(group: u8, len: usize, id: u64) -> Vec<TokenId> {
    let mut tokens: Vec<TokenId> = (0..len)
        .map(|i| 1 + ((group as usize * 7 + i) % 39) as TokenId)
        .collect();
    if id % 2 == 1 {
        // Half the requests end differently from their group.
        if let Some(last) = tokens.last_mut() {
            *last = 1 + (*last + 11) % 39;
        }
    }
    tokens
}

/// The fake model's next token: a hash of the whole context it read. EOS now and then.
fn next_token(context: &[TokenId]) -> TokenId {
    let h = context.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &t| {
        (h ^ u64::from(t)).wrapping_mul(0x100_0000_01b3)
    });
    (h % VOCAB) as TokenId
}

struct FakeModel {
    block_size: usize,
    /// (token, salt) written to each KV slot.
    slots: Vec<Option<(TokenId, Option<String>)>>,
}

impl FakeModel {
    fn new(config: &SchedulerConfig) -> Self {
        Self {
            block_size: config.block_size,
            slots: vec![None; config.num_blocks * config.block_size],
        }
    }

    /// Writes each entry's new tokens, reads its context back and checks it, and samples.
    fn run(&mut self, s: &Scheduler, batch: &ScheduledBatch) -> Vec<(RequestId, TokenId)> {
        let mut sampled = Vec::new();
        for entry in &batch.requests {
            let request = s.request(entry.id).expect("scheduled requests exist");
            let salt = request.cache_salt().map(|s| s.as_str().to_owned());
            for (slot, &token) in entry.slot_mapping(self.block_size).zip(&entry.token_ids) {
                self.slots[slot] = Some((token, salt.clone()));
            }
            let context: Vec<TokenId> = (0..entry.context_len())
                .map(|pos| {
                    let block = entry.block_table[pos / self.block_size];
                    let slot = block.index() * self.block_size + pos % self.block_size;
                    let (token, writer) = self.slots[slot].clone().expect("context slot written");
                    assert_eq!(
                        writer, salt,
                        "{} read KV written under another salt",
                        entry.id
                    );
                    token
                })
                .collect();
            assert_eq!(
                context,
                request.all_token_ids()[..entry.context_len()],
                "{} read the wrong KV",
                entry.id
            );
            if entry.needs_logits {
                sampled.push((entry.id, next_token(&context)));
            }
        }
        sampled
    }
}

/// Invariants of the block pool against the scheduler's view.
fn check_blocks(s: &Scheduler) {
    let kv = s.kv_cache();
    let mut uses: HashMap<BlockId, u32> = HashMap::new();
    let mut salt_of: HashMap<BlockId, Option<String>> = HashMap::new();
    for id in kv.request_ids() {
        let request = s
            .request(id)
            .expect("a block table belongs to a live request");
        assert_eq!(
            request.status(),
            RequestStatus::Running,
            "{id} holds blocks but is not running"
        );
        let salt = request.cache_salt().map(|s| s.as_str().to_owned());
        for &block in kv.block_table(id) {
            *uses.entry(block).or_default() += 1;
            let first = salt_of.entry(block).or_insert_with(|| salt.clone());
            assert_eq!(*first, salt, "{block} shared across cache salts");
        }
    }
    let mut num_free = 0;
    for b in 0..kv.num_blocks() {
        let block = BlockId(b as u32);
        let refs = kv.pool().ref_count(block);
        let free = kv.pool().is_free(block);
        assert!(free != (refs > 0), "{block}: free={free} refs={refs}");
        assert_eq!(
            refs,
            uses.get(&block).copied().unwrap_or(0),
            "{block} ref count"
        );
        num_free += usize::from(free);
    }
    assert_eq!(num_free, kv.num_free_blocks());
}

fn check_batch(s: &Scheduler, batch: &ScheduledBatch) {
    let config = s.config();
    assert!(batch.num_batched_tokens <= config.max_num_batched_tokens);
    assert!(batch.requests.len() <= config.max_num_seqs);
    assert!(s.num_running() <= config.max_num_seqs);
    for entry in &batch.requests {
        assert!(entry.num_new_tokens >= 1);
        assert!(entry.num_new_tokens <= config.max_prefill_chunk);
        assert_eq!(entry.token_ids.len(), entry.num_new_tokens);
        assert!(entry.block_table.len() * config.block_size >= entry.context_len());
    }
}

/// A router's copy of the prefix index, built from the KV events alone.
struct EventMirror {
    hasher: BlockHasher,
    block_size: usize,
    blocks: HashSet<BlockHash>,
    /// Every hash ever stored: a parent may be evicted before its child is stored (when two
    /// requests computed the same block and the copy in the index went first), but it was
    /// announced before.
    ever_stored: HashSet<BlockHash>,
    cleared: bool,
}

impl EventMirror {
    fn apply(&mut self, events: Vec<KvCacheEvent>) {
        for event in events {
            match event {
                KvCacheEvent::AllBlocksCleared => {
                    self.blocks.clear();
                    self.cleared = true;
                }
                KvCacheEvent::BlockStored {
                    hashes,
                    parent,
                    token_ids,
                    cache_salt,
                } => {
                    assert!(self.cleared, "AllBlocksCleared comes first");
                    assert_eq!(token_ids.len(), hashes.len() * self.block_size);
                    let mut parent_hash = match parent {
                        Some(p) => {
                            assert!(self.ever_stored.contains(&p), "parent announced before");
                            p
                        }
                        None => self.hasher.root(),
                    };
                    for (hash, tokens) in hashes.iter().zip(token_ids.chunks(self.block_size)) {
                        // What a router can check: the hash follows from the event's contents.
                        let key = BlockKey {
                            parent: parent_hash,
                            tokens,
                            extra: ExtraKeys {
                                cache_salt: cache_salt.as_ref(),
                            },
                        };
                        assert_eq!(self.hasher.hash(&key), *hash);
                        assert!(self.blocks.insert(*hash), "stored twice");
                        self.ever_stored.insert(*hash);
                        parent_hash = *hash;
                    }
                }
                KvCacheEvent::BlockRemoved { hashes } => {
                    for hash in hashes {
                        assert!(self.blocks.remove(&hash), "removed but never stored");
                    }
                }
            }
        }
    }
}

struct Harness {
    s: Scheduler,
    model: FakeModel,
    ids: Vec<RequestId>,
    next_id: u64,
    mirror: Option<EventMirror>,
}

impl Harness {
    fn new(config: SchedulerConfig) -> Self {
        let model = FakeModel::new(&config);
        Self {
            s: Scheduler::new(config, vec![EOS]).unwrap(),
            model,
            ids: Vec::new(),
            next_id: 0,
            mirror: None,
        }
    }

    /// Turns KV events on; every check from now on also compares the mirror with the index.
    fn with_events(mut self) -> Self {
        self.s.enable_kv_events();
        self.mirror = Some(EventMirror {
            hasher: BlockHasher::new(self.s.config().hash_seed),
            block_size: self.s.config().block_size,
            blocks: HashSet::new(),
            ever_stored: HashSet::new(),
            cleared: false,
        });
        self
    }

    fn check_mirror(&mut self) {
        let Some(mirror) = &mut self.mirror else {
            return;
        };
        mirror.apply(self.s.take_kv_events());
        let index: HashSet<BlockHash> = self.s.kv_cache().pool().cached_hashes().collect();
        assert_eq!(
            mirror.blocks, index,
            "the events' index differs from the engine's"
        );
    }

    fn pick(&self, i: usize) -> Option<RequestId> {
        (!self.ids.is_empty()).then(|| self.ids[i % self.ids.len()])
    }

    fn step(&mut self) {
        let batch = self.s.schedule();
        check_batch(&self.s, &batch);
        check_blocks(&self.s);
        let sampled = self.model.run(&self.s, &batch);
        for f in self.s.update_from_output(&batch, &sampled) {
            assert_ne!(f.reason, FinishReason::Abort);
        }
        self.check_mirror();
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Submit {
                prefix_group,
                prompt_len,
                salt,
                priority,
                max_tokens,
            } => {
                let id = RequestId(self.next_id);
                let mut new = NewRequest::new(
                    id,
                    prompt(prefix_group, prompt_len, self.next_id),
                    SamplingParams::greedy(max_tokens),
                )
                .with_priority(priority);
                new.cache_salt = SALTS[salt].map(CacheSalt::new);
                new.tenant = TENANTS[(self.next_id % 3) as usize].map(TenantKey::new);
                self.next_id += 1;
                if self.s.add_request(new).is_ok() {
                    self.ids.push(id);
                }
            }
            Op::Step => self.step(),
            Op::Abort(i) => {
                if let Some(id) = self.pick(i) {
                    self.s.abort(id);
                }
            }
            Op::Finish(i) => {
                if let Some(id) = self.pick(i) {
                    self.s.finish(id, FinishReason::Stop);
                }
            }
            Op::Fork(i) => {
                if let Some(parent) = self.pick(i) {
                    let child = RequestId(self.next_id);
                    self.next_id += 1;
                    if self
                        .s
                        .fork_request(parent, child, SamplingParams::greedy(3), None)
                        .is_ok()
                    {
                        self.ids.push(child);
                    }
                }
            }
        }
        check_blocks(&self.s);
        self.check_mirror();
    }

    /// Steps until every request has ended; each step must make progress.
    fn drain(&mut self) {
        let mut steps = 0;
        while self.s.has_unfinished_requests() {
            self.step();
            steps += 1;
            assert!(steps < 2_000, "no progress");
        }
    }
}

/// What greedy decoding with the fake model gives a request run on its own.
fn expected_output(prompt: &[TokenId], max_tokens: usize, context_limit: usize) -> Vec<TokenId> {
    let mut tokens = prompt.to_vec();
    let mut output = Vec::new();
    loop {
        let token = next_token(&tokens);
        tokens.push(token);
        output.push(token);
        if token == EOS || output.len() >= max_tokens || tokens.len() >= context_limit {
            return output;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn blocks_stay_consistent_under_any_interleaving(
        config in config(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut h = Harness::new(config);
        for op in &ops {
            h.apply(op);
        }
        h.drain();
        let kv = h.s.kv_cache();
        prop_assert_eq!(kv.num_free_blocks(), kv.num_blocks());
        prop_assert_eq!(kv.request_ids().count(), 0);
    }

    #[test]
    fn kv_events_rebuild_exactly_the_prefix_index(
        config in config(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut h = Harness::new(config).with_events();
        for op in &ops {
            h.apply(op);
        }
        h.drain();
    }

    #[test]
    fn preemption_and_prefix_caching_do_not_change_greedy_outputs(
        config in config(),
        submits in prop::collection::vec((0u8..3, 1usize..30, 0usize..3, 0i32..3, 1usize..12), 1..12),
        steps_between in prop::collection::vec(0usize..3, 12),
    ) {
        let context_limit = config.max_model_len.min(config.num_blocks * config.block_size);
        let mut h = Harness::new(config);
        let mut expected = HashMap::new();
        for (k, &(group, len, salt, priority, max_tokens)) in submits.iter().enumerate() {
            let id = h.next_id;
            h.apply(&Op::Submit { prefix_group: group, prompt_len: len, salt, priority, max_tokens });
            if h.ids.last() == Some(&RequestId(id)) {
                let prompt = prompt(group, len, id);
                expected.insert(RequestId(id), expected_output(&prompt, max_tokens, context_limit));
            }
            for _ in 0..steps_between[k] {
                h.step();
            }
        }
        let mut outputs = HashMap::new();
        let mut steps = 0;
        while h.s.has_unfinished_requests() {
            let batch = h.s.schedule();
            check_blocks(&h.s);
            let sampled = h.model.run(&h.s, &batch);
            for f in h.s.update_from_output(&batch, &sampled) {
                outputs.insert(f.id, f.output_token_ids);
            }
            steps += 1;
            prop_assert!(steps < 2_000, "no progress");
        }
        // Requests that ended during the submission phase were not collected; compare the rest.
        for (id, output) in &outputs {
            prop_assert_eq!(output, &expected[id], "{}", id);
        }
    }

    #[test]
    fn no_tenant_starves_for_a_step_while_another_holds_two_slots(
        (budget, max_num_seqs) in (4usize..40, 2usize..6),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        // Blocks to spare, so only slots and budget are contended.
        let config = SchedulerConfig {
            max_num_batched_tokens: budget,
            max_num_seqs,
            max_prefill_chunk: 16,
            block_size: 4,
            num_blocks: 512,
            max_model_len: 48,
            sampling_seed: Some(1),
            ..SchedulerConfig::default()
        };
        let mut h = Harness::new(config);
        for op in &ops {
            if !matches!(op, Op::Step) {
                h.apply(op);
                continue;
            }
            // Checked right after scheduling: finishing in the same step is fine.
            let batch = h.s.schedule();
            check_no_starving_tenant(&h.s);
            let sampled = h.model.run(&h.s, &batch);
            h.s.update_from_output(&batch, &sampled);
        }
        h.drain();
    }
}

/// After a step, in the best priority class with waiting work, no tenant waits with nothing
/// running while another tenant holds two or more running sequences of that class.
fn check_no_starving_tenant(s: &Scheduler) {
    let tenant_of = |id: RequestId| {
        let r = s.request(id).expect("live request");
        (r.priority(), r.tenant().map(|t| t.as_str().to_owned()))
    };
    let Some(best) = s.waiting_ids().map(|id| tenant_of(id).0).min() else {
        return;
    };
    let mut running: HashMap<Option<String>, usize> = HashMap::new();
    for &id in s.running_ids() {
        let (priority, tenant) = tenant_of(id);
        if priority == best {
            *running.entry(tenant).or_default() += 1;
        }
    }
    let waiting: HashSet<Option<String>> = s
        .waiting_ids()
        .map(tenant_of)
        .filter(|(priority, _)| *priority == best)
        .map(|(_, tenant)| tenant)
        .collect();
    for tenant in waiting {
        if running.contains_key(&tenant) {
            continue;
        }
        let holder = running.iter().find(|(_, &n)| n >= 2);
        assert!(
            holder.is_none(),
            "tenant {tenant:?} waits with nothing running while {holder:?} holds more"
        );
    }
}
