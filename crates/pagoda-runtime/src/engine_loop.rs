//! The engine loop: one OS thread applies commands and runs steps for as long as there is work.
//!
//! A panic is a bug, but no request may take the engine down with it. A panic while queueing a
//! request fails that request; a panic in a step fails the requests of that step (their blocks
//! freed) and the loop goes on. If the loop itself dies, every open request, and every request
//! still in the command queue, gets a final output with `error` set, and `is_alive` turns false.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pagoda_engine::FinishReason;

use crate::core::{panic_message, EngineCore};
use crate::handle::Shared;
use crate::output_channel::OutputSender;
use crate::pending::PendingSlot;
use crate::request::{Completion, GenerateRequest, RequestOutput};

/// How long the engine loop waits for a command after a step that scheduled nothing.
const IDLE_WAIT: Duration = Duration::from_millis(5);

pub(crate) enum Command {
    Add {
        first_id: u64,
        request: Box<GenerateRequest>,
        sender: OutputSender,
        submitted: Instant,
        /// One place in the pending counts per choice.
        pending: Vec<PendingSlot>,
    },
    /// Replies with every block hash in the prefix cache.
    PrefixCacheHashes(tokio::sync::oneshot::Sender<Vec<pagoda_engine::BlockHash>>),
    Shutdown,
}

pub(crate) fn spawn(
    core: EngineCore,
    commands: Receiver<Command>,
    shared: Arc<Shared>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("pagoda-engine".into())
        .spawn(move || run_loop(core, commands, shared))
}

/// Marks the engine dead however the loop ends, so health checks see it.
struct AliveGuard(Arc<Shared>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.accepting.store(false, Ordering::SeqCst);
        self.0.alive.store(false, Ordering::SeqCst);
    }
}

fn run_loop(mut core: EngineCore, commands: Receiver<Command>, shared: Arc<Shared>) {
    let guard = AliveGuard(shared.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| drive(&mut core, &commands, &shared)));
    let Err(panic) = outcome else {
        return;
    };
    let message = format!("the engine stopped: {}", panic_message(&*panic));
    // Refuse new work before answering what is queued, so nothing slips in unanswered.
    drop(guard);
    // The scheduler may be what broke: `fail_all` only talks to the streams. If even that
    // panics, dropping `core` closes the streams and `RequestStream` reports the error.
    let _ = catch_unwind(AssertUnwindSafe(|| core.fail_all(&message)));
    while let Ok(command) = commands.try_recv() {
        if let Command::Add {
            request, sender, ..
        } = command
        {
            refuse(&sender, request.sampling.n.max(1), &message);
        }
    }
}

fn drive(core: &mut EngineCore, commands: &Receiver<Command>, shared: &Shared) {
    let mut shutting_down = false;
    loop {
        if !core.has_work() {
            if shutting_down {
                break;
            }
            match commands.recv() {
                Ok(command) => apply(core, command, &mut shutting_down),
                Err(_) => break,
            }
        }
        while let Ok(command) = commands.try_recv() {
            apply(core, command, &mut shutting_down);
        }
        #[cfg(feature = "fault-injection")]
        core.kill_if_requested();
        run_step(core);
        core.publish_kv_events();
        *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = core.stats().clone();
        if core.was_idle() && core.has_work() {
            // Admission keeps every request within the KV budget, so this should not happen;
            // if it does, wait for the next command instead of spinning a core.
            if let Ok(command) = commands.recv_timeout(IDLE_WAIT) {
                apply(core, command, &mut shutting_down);
            }
        }
    }
}

/// One step, with the requests of a step that panics failed and the loop kept going. A panic
/// while recovering is not caught: the loop dies and `run_loop` answers everyone.
fn run_step(core: &mut EngineCore) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        core.abort_abandoned();
        core.step();
    }));
    if let Err(panic) = outcome {
        let message = format!(
            "internal error: the engine failed this request's step ({})",
            panic_message(&*panic)
        );
        core.fail_step(&message);
    }
}

fn apply(core: &mut EngineCore, command: Command, shutting_down: &mut bool) {
    match command {
        Command::Add {
            first_id,
            request,
            sender,
            submitted,
            pending,
        } => {
            let n = request.sampling.n.max(1);
            let reply = sender.clone();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                core.add(first_id, *request, sender, submitted, pending)
            }));
            let error = match outcome {
                Ok(Ok(())) => return,
                // Checked before sending, so this is unexpected.
                Ok(Err(e)) => e.to_string(),
                Err(panic) => {
                    core.discard(first_id, n);
                    format!(
                        "internal error while queueing this request ({})",
                        panic_message(&*panic)
                    )
                }
            };
            refuse(&reply, n, &error);
        }
        Command::PrefixCacheHashes(reply) => {
            // Events of the steps so far were handed over already: a router that read them
            // all holds exactly this.
            core.publish_kv_events();
            let _ = reply.send(core.prefix_cache_hashes());
        }
        Command::Shutdown => *shutting_down = true,
    }
}

/// A final output with `error` for each of a request's `n` choices.
fn refuse(sender: &OutputSender, n: usize, error: &str) {
    for index in 0..n {
        let completion = Completion {
            finish_reason: FinishReason::Abort,
            usage: Default::default(),
            timings: Default::default(),
            error: Some(error.to_string()),
            cause: Default::default(),
        };
        sender.send(RequestOutput::last(index, completion));
    }
}
