//! The engine loop: a dedicated OS thread that owns the [`Engine`] and the [`Scheduler`].
//!
//! Requests arrive over a channel; each step it drops cancelled sequences (their reply
//! channel is closed), plans, runs the engine, samples, replies over each request's own
//! channel, caches the blocks the step wrote and only then publishes their KV events.
//!
//! [`kv`]: the KV transfer side of the loop: streaming a prefill's blocks out as they are
//! cached, and importing blocks a prefill replica sent.

mod kv;
mod tier;

use crate::server::error::ServerError;
use crate::server::events::EventLog;
use crate::server::fault::{NanFault, DEGENERATE_MESSAGE};
use crate::server::kv::block::{Export, ImportBlock};
use crate::server::kv::tier::write::TierSink;
use crate::server::metrics::{ewma, Metrics};
use crate::server::sched::{PlanItem, SchedConfig, Scheduler, SeqId, Sequence};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use warmpath_core::{BlockSize, CacheSalt, CheckpointId, HashNamespace, TokenId};
use warmpath_engine::sampling::{all_finite, Sampler, SamplingParams};
use warmpath_engine::{Engine, EngineOptions, KvLayout, ModelSource, StepItem};
use warmpath_kv_cache::pages_for_budget;
use warmpath_kv_cache::RadixCache;
use warmpath_protocol::replica_api::ReplicaLoad;
use warmpath_text::ChatTokenizer;

/// Why a sequence stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-sequence token.
    Stop,
    /// `max_tokens` or the context window.
    Length,
}

impl FinishReason {
    /// The OpenAI `finish_reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// What the engine loop tells a request.
#[derive(Clone, Debug, PartialEq)]
pub enum SeqEvent {
    /// Admitted for the first time; `cached_tokens` prompt tokens came from the cache.
    Admitted {
        /// Prompt tokens served from the prefix cache.
        cached_tokens: usize,
    },
    /// A generated token (EOS tokens are not sent).
    Token(TokenId),
    /// A continuation's replayed token went through its decode step (nothing to send:
    /// the client has it; only a sign of life).
    Replayed,
    /// Generation ended.
    Finished {
        /// Why.
        reason: FinishReason,
        /// Tokens generated (EOS included).
        completion_tokens: usize,
    },
    /// The request failed.
    Failed(String),
}

/// A generation request for the engine loop.
#[derive(Debug)]
pub struct GenRequest {
    /// Prompt token ids.
    pub prompt: Vec<TokenId>,
    /// Sampling parameters (`max_tokens` is the generation limit).
    pub params: SamplingParams,
    /// Tenant cache salt.
    pub salt: Option<CacheSalt>,
    /// Keep generating past EOS.
    pub ignore_eos: bool,
    /// Where to send [`SeqEvent`]s; dropping the receiver cancels the request.
    pub reply: UnboundedSender<SeqEvent>,
    /// A prefill for another replica: every full prompt block from `skip` on is sent here
    /// as soon as it is cached (`POST /v1/kv/prefill`).
    pub export: Option<Export>,
    /// Whether its computed blocks go to the shared KV tier (false: the gateway turned
    /// the tier off for it, `x-warmpath-kv-tier-off`).
    pub tier: bool,
    /// Random draws the sampler already took (a continuation of a migrated stream).
    pub rng_draws: u64,
    /// A continuation's tokens, already sent by the replica that started the stream: fed
    /// one per decode step in place of a sample (not sent again), so their K/V is computed
    /// exactly as the uninterrupted run computed it (a prefill rounds differently).
    pub replay: Vec<TokenId>,
}

/// Messages to the engine loop.
#[derive(Debug)]
pub enum WorkerMsg {
    /// Generate.
    Generate(GenRequest),
    /// Drop every cached block (e.g. after a weight reload): starts a new event epoch.
    ClearCache,
    /// How many leading blocks of these hashes are cached.
    CachedPrefix {
        /// The prompt's chain hashes.
        hashes: Vec<warmpath_core::BlockHash>,
        /// The answer.
        reply: tokio::sync::oneshot::Sender<usize>,
    },
    /// Cache blocks another replica computed (checked by the caller against this
    /// replica's layout and hashes); answers how many leading blocks are cached after it.
    Import {
        /// Consecutive blocks of one prompt, in order.
        blocks: Vec<ImportBlock>,
        /// The answer.
        reply: tokio::sync::oneshot::Sender<usize>,
    },
}

/// State the engine loop shares with the HTTP side.
#[derive(Debug, Default)]
pub struct WorkerShared {
    /// True while the loop runs.
    pub alive: AtomicBool,
    /// Latest load figures.
    pub load: Mutex<ReplicaLoad>,
}

/// Facts about the loaded model, sent back once loading finished.
#[derive(Clone, Debug)]
pub struct ModelFacts {
    /// Served model name.
    pub model_name: String,
    /// Checkpoint id.
    pub checkpoint: CheckpointId,
    /// Tokenizer.
    pub tokenizer: ChatTokenizer,
    /// Context window.
    pub max_context: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// KV pages.
    pub kv_pages: usize,
    /// Bytes per KV page.
    pub page_bytes: usize,
    /// Shape of a KV page (what a KV block record must match).
    pub kv_layout: warmpath_engine::KvLayout,
    /// Device name.
    pub device: String,
}

/// Engine loop configuration.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Model to load.
    pub model: ModelSource,
    /// KV pool budget in bytes.
    pub kv_memory: u64,
    /// Tokens per page.
    pub block_size: BlockSize,
    /// Compute threads (0 = engine default).
    pub threads: usize,
    /// Scheduler limits.
    pub token_budget: usize,
    /// Running cap.
    pub max_running: usize,
    /// Fairness bound in steps.
    pub fairness_steps: u64,
    /// The order prefills are served in.
    pub prefill_order: router_policy::PrefillOrder,
    /// Target time of a step with prefill work (`--step-target-ms`): prefills are
    /// chunked to the measured prefill rate times this (at least [`MIN_PREFILL_CHUNK`]
    /// tokens), so a request that arrives mid-prefill waits about one such step. `None`:
    /// chunks are bounded by the token budget only.
    pub step_target: Option<Duration>,
    /// Compute device (`cpu` or `cuda:N`).
    pub device: warmpath_engine::Device,
    /// Test hook (`--fault-nan-logits-after`): see [`NanFault`].
    pub fault_nan_logits_after: Option<u64>,
    /// The checkpoint id to publish instead of the weights' content hash
    /// (`--checkpoint-id`).
    pub checkpoint_id: Option<String>,
    /// The shared KV tier's write queue (`--kv-store`): every full block a sequence
    /// computes goes there.
    pub tier: Option<TierSink>,
}

/// The smallest prefill chunk `--step-target-ms` makes: below it a step's fixed costs
/// start to show in the prefill rate.
pub const MIN_PREFILL_CHUNK: usize = 16;

struct Live {
    sampler: Sampler,
    reply: UnboundedSender<SeqEvent>,
    max_new: usize,
    ignore_eos: bool,
    arrived: Instant,
    last_token: Option<Instant>,
    announced: bool,
    export: Option<Export>,
    /// Blocks offered to the shared KV tier so far (or skipped as found cached).
    tier_next: usize,
    /// Whether its blocks may go to the shared KV tier ([`GenRequest::tier`]).
    tier: bool,
    /// Tokens still to replay ([`GenRequest::replay`]), and how many were.
    replay: std::collections::VecDeque<TokenId>,
    replayed: usize,
}

/// Loads the model with a KV pool sized from the memory budget.
fn load_engine(cfg: &WorkerConfig) -> Result<Engine, ServerError> {
    let err = |e: warmpath_engine::EngineError| ServerError::Engine(e.to_string());
    // The page size depends on the model's shape, known only once loaded: probe with a
    // one-page pool, then load with the real size.
    let probe_opts = EngineOptions {
        kv_pages: 1,
        block_size: cfg.block_size,
        threads: cfg.threads,
    };
    let probe = Engine::load(&cfg.model, &probe_opts).map_err(err)?;
    // The configured device's backend decides how wide a stored value is (the probe runs
    // on the CPU, so a GPU is initialised once).
    let layout = KvLayout {
        dtype: cfg.device.kv_dtype(),
        ..probe.kv_layout()
    };
    let page_bytes = layout.bytes_per_page() as u64;
    drop(probe);
    let pages = pages_for_budget(cfg.kv_memory, page_bytes);
    if pages < 2 {
        return Err(ServerError::Config(format!(
            "--kv-memory {} holds {pages} pages of {page_bytes} bytes; need at least 2",
            cfg.kv_memory
        )));
    }
    let opts = EngineOptions {
        kv_pages: pages,
        block_size: cfg.block_size,
        threads: cfg.threads,
    };
    Engine::load_on(&cfg.model, &opts, cfg.device).map_err(err)
}

/// Starts the engine loop thread; returns once the model is loaded.
pub async fn spawn(
    cfg: WorkerConfig,
    events: Arc<EventLog>,
    metrics: Metrics,
) -> Result<(ModelFacts, Sender<WorkerMsg>, Arc<WorkerShared>), ServerError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let shared = Arc::new(WorkerShared::default());
    let shared2 = shared.clone();
    std::thread::Builder::new()
        .name("engine-loop".into())
        .spawn(move || {
            let engine = match load_engine(&cfg) {
                Ok(e) => e,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let facts = ModelFacts {
                model_name: engine.model_name().to_string(),
                checkpoint: cfg
                    .checkpoint_id
                    .as_deref()
                    .map_or_else(|| engine.checkpoint().clone(), CheckpointId::new),
                tokenizer: engine.tokenizer().clone(),
                max_context: engine.config().max_context,
                vocab_size: engine.config().vocab_size,
                kv_pages: engine.num_pages(),
                page_bytes: engine.kv_layout().bytes_per_page(),
                kv_layout: engine.kv_layout(),
                device: engine.device().to_string(),
            };
            let eos = facts.tokenizer.eos_tokens().to_vec();
            let ns = HashNamespace::new(facts.checkpoint.clone());
            let mut sched = Scheduler::new(
                SchedConfig {
                    block_size: cfg.block_size,
                    token_budget: cfg.token_budget,
                    max_running: cfg.max_running,
                    fairness_steps: cfg.fairness_steps,
                    order: cfg.prefill_order,
                },
                RadixCache::new(facts.kv_pages),
            );
            if cfg.step_target.is_some() {
                // No prefill rate is measured yet: the first step with prefill work is a
                // short one, so a request arriving just after start-up does not wait for
                // a whole token budget's prefill.
                sched.set_prefill_cap(MIN_PREFILL_CHUNK);
            }
            let max_context = facts.max_context;
            let mut lp = Loop {
                engine,
                sched,
                events,
                metrics,
                shared: shared2,
                eos,
                ns,
                max_context,
                next_id: 0,
                block_size: cfg.block_size,
                clear_pending: false,
                rates: Rates::default(),
                step_target: cfg.step_target,
                steps: 0,
                endings: Vec::new(),
                fault: NanFault::new(cfg.fault_nan_logits_after),
                tier: cfg.tier.clone(),
            };
            // Load figures and liveness are in place before the server answers anything.
            lp.metrics
                .kv_pages_total
                .set(lp.sched.cache().total_pages() as i64);
            lp.publish_load();
            lp.shared.alive.store(true, Ordering::SeqCst);
            if ready_tx.send(Ok(facts)).is_err() {
                return;
            }
            lp.run(rx);
        })?;
    let facts = ready_rx.await.map_err(|_| ServerError::EngineStopped)??;
    Ok((facts, tx, shared))
}

/// Exponentially smoothed throughput.
#[derive(Default)]
struct Rates {
    prefill: f64,
    decode: f64,
}

struct Loop {
    engine: Engine,
    sched: Scheduler<Live>,
    events: Arc<EventLog>,
    metrics: Metrics,
    shared: Arc<WorkerShared>,
    eos: Vec<TokenId>,
    ns: HashNamespace,
    max_context: usize,
    next_id: u64,
    block_size: BlockSize,
    clear_pending: bool,
    rates: Rates,
    /// `WorkerConfig::step_target`.
    step_target: Option<Duration>,
    /// Engine steps run.
    steps: u64,
    /// Last messages of sequences that ended this step, sent once the step is published.
    endings: Vec<(UnboundedSender<SeqEvent>, SeqEvent)>,
    /// The NaN-logits test hook (off unless `--fault-nan-logits-after`).
    fault: NanFault,
    /// The shared KV tier's write queue (`--kv-store`).
    tier: Option<TierSink>,
}

/// Marks the loop dead when it exits, by return or by panic.
struct AliveGuard(Arc<WorkerShared>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::SeqCst);
    }
}

impl Loop {
    fn run(&mut self, rx: Receiver<WorkerMsg>) {
        let _guard = AliveGuard(self.shared.clone());
        loop {
            if self.sched.is_idle() && !self.clear_pending {
                match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(m) => self.handle(m),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            loop {
                match rx.try_recv() {
                    Ok(m) => self.handle(m),
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        if self.sched.is_idle() {
                            return;
                        }
                        break;
                    }
                }
            }
            self.try_clear();
            self.step();
        }
        tracing::info!("engine loop stopped");
    }

    fn handle(&mut self, msg: WorkerMsg) {
        match msg {
            WorkerMsg::Generate(req) => {
                self.next_id += 1;
                let seed = self.ns.clone().with_salt(req.salt).root_seed();
                let live = Live {
                    sampler: Sampler::resumed(&req.params, req.rng_draws),
                    reply: req.reply,
                    max_new: req.params.max_tokens.max(1),
                    ignore_eos: req.ignore_eos,
                    arrived: Instant::now(),
                    last_token: None,
                    announced: false,
                    export: req.export,
                    tier_next: 0,
                    tier: req.tier,
                    replay: req.replay.into(),
                    replayed: 0,
                };
                let seq =
                    Sequence::new(SeqId(self.next_id), req.prompt, seed, self.block_size, live);
                self.sched.add(seq);
            }
            WorkerMsg::ClearCache => self.clear_pending = true,
            WorkerMsg::CachedPrefix { hashes, reply } => {
                let _ = reply.send(self.sched.cache().peek_prefix_len(&hashes));
            }
            WorkerMsg::Import { blocks, reply } => {
                let _ = reply.send(self.import(&blocks));
            }
        }
    }

    fn try_clear(&mut self) {
        if self.clear_pending && self.sched.cache_mut().clear() {
            self.clear_pending = false;
            self.events.publish(self.sched.cache_mut().take_events());
            tracing::info!("prefix cache cleared; new event epoch");
        }
    }

    fn step(&mut self) {
        let cancelled = self.sched.remove_where(|s| s.extra.reply.is_closed());
        if !cancelled.is_empty() {
            self.metrics
                .requests_cancelled
                .inc_by(cancelled.len() as u64);
            tracing::debug!(n = cancelled.len(), "cancelled sequences released");
        }
        let before = self.sched.stats().preemptions;
        let plan = self.sched.schedule();
        self.metrics
            .preemptions
            .inc_by(self.sched.stats().preemptions - before);
        for seq in plan.failed {
            let msg = format!(
                "the request needs more KV pages than the pool has ({} pages)",
                self.sched.cache().total_pages()
            );
            self.endings.push((seq.extra.reply, SeqEvent::Failed(msg)));
        }
        if !plan.items.is_empty() {
            // What runs now is visible in the load before its first token is sent.
            self.publish_load();
            self.announce(&plan.items);
            self.run_items(&plan.items);
        } else if !self.sched.is_idle() {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.events.publish(self.sched.cache_mut().take_events());
        self.publish_load();
        // A client that saw its answer end finds the load and the events up to date.
        for (reply, ev) in self.endings.drain(..) {
            let _ = reply.send(ev);
        }
    }

    fn announce(&mut self, items: &[PlanItem]) {
        for it in items {
            if let Some(seq) = self.sched.get_mut(it.id) {
                if !seq.extra.announced {
                    seq.extra.announced = true;
                    let cached = seq.cached_tokens();
                    self.metrics.prompt_tokens_cached.inc_by(cached as u64);
                    let _ = seq.extra.reply.send(SeqEvent::Admitted {
                        cached_tokens: cached,
                    });
                }
            }
        }
    }

    fn run_items(&mut self, items: &[PlanItem]) {
        let t0 = Instant::now();
        let result = {
            let mut step_items = Vec::with_capacity(items.len());
            for it in items {
                let Some(seq) = self.sched.get(it.id) else {
                    continue;
                };
                step_items.push(StepItem {
                    tokens: &seq.tokens()[it.start..it.start + it.len],
                    start_pos: it.start,
                    pages: seq.pages(),
                });
            }
            self.engine.step(&step_items)
        };
        self.metrics.steps.inc();
        self.steps += 1;
        let logits = match result {
            Ok(l) => l,
            Err(e) => {
                // Nothing of this step is cached: release and fail its sequences.
                tracing::error!(error = %e, "engine step failed");
                for it in items {
                    if let Some(seq) = self.sched.finish(it.id) {
                        self.endings
                            .push((seq.extra.reply, SeqEvent::Failed(e.to_string())));
                    }
                }
                return;
            }
        };
        tracing::trace!(
            target: "warmpath_replica::step",
            ms = t0.elapsed().as_secs_f64() * 1000.0,
            items = ?items.iter().map(|it| (it.id, it.start, it.len)).collect::<Vec<_>>(),
            "step"
        );
        self.sched.complete(items);
        self.export_cached(items);
        self.write_tier(items);
        let dt = t0.elapsed().as_secs_f64().max(1e-9);
        let (mut prefill, mut decode) = (0usize, 0usize);
        for it in items {
            let prompt_len = self.sched.get(it.id).map_or(0, |s| s.prompt_len());
            let prompt_part = prompt_len.saturating_sub(it.start).min(it.len);
            self.metrics
                .prompt_tokens_computed
                .inc_by(prompt_part as u64);
            if it.len == 1 && it.start >= prompt_len {
                decode += 1;
            } else {
                prefill += it.len;
            }
        }
        if prefill > 0 {
            self.rates.prefill = ewma(self.rates.prefill, prefill as f64 / dt);
            if let Some(target) = self.step_target {
                let cap = (self.rates.prefill * target.as_secs_f64()) as usize;
                self.sched.set_prefill_cap(cap.max(MIN_PREFILL_CHUNK));
            }
        }
        if decode > 0 {
            self.rates.decode = ewma(self.rates.decode, decode as f64 / dt);
        }
        for (it, lg) in items.iter().zip(logits.iter()) {
            if it.sample {
                self.sample_one(it.id, lg);
            }
        }
    }

    fn sample_one(&mut self, id: SeqId, logits: &[f32]) {
        let now = Instant::now();
        let poisoned;
        let (generated, max_new) = self
            .sched
            .get(id)
            .map_or((0, 0), |s| (s.generated().len(), s.extra.max_new));
        let logits = match self.fault.fire(generated, max_new, logits.len()) {
            Some(nan) => {
                poisoned = nan;
                &poisoned
            }
            None => logits,
        };
        if !all_finite(logits) {
            self.fail_degenerate(id);
            return;
        }
        let Some(seq) = self.sched.get_mut(id) else {
            return;
        };
        let replayed = seq.extra.replay.pop_front();
        let tok = match replayed {
            Some(t) => {
                seq.extra.replayed += 1;
                t
            }
            None => seq.extra.sampler.sample(logits),
        };
        match seq.extra.last_token {
            None => self
                .metrics
                .ttft_seconds
                .observe((now - seq.extra.arrived).as_secs_f64()),
            Some(t) => self
                .metrics
                .inter_token_seconds
                .observe((now - t).as_secs_f64()),
        }
        seq.extra.last_token = Some(now);
        let is_eos = !seq.extra.ignore_eos && self.eos.contains(&tok);
        if replayed.is_some() {
            let _ = seq.extra.reply.send(SeqEvent::Replayed);
        } else if !is_eos {
            let _ = seq.extra.reply.send(SeqEvent::Token(tok));
        }
        self.metrics.generation_tokens.inc();
        self.sched.push_token(id, tok);
        let Some(seq) = self.sched.get(id) else {
            return;
        };
        let generated = seq.generated().len();
        let reason = if is_eos {
            Some(FinishReason::Stop)
        } else if generated >= seq.extra.max_new || seq.tokens().len() >= self.max_context {
            Some(FinishReason::Length)
        } else {
            None
        };
        if let Some(reason) = reason {
            if let Some(seq) = self.sched.finish(id) {
                self.metrics.requests_finished.inc();
                self.endings.push((
                    seq.extra.reply,
                    SeqEvent::Finished {
                        reason,
                        // A continuation's answer counts the replayed tokens on its own.
                        completion_tokens: generated - seq.extra.replayed,
                    },
                ));
            }
        }
    }

    /// Ends a sequence whose logits are NaN or infinite (matrix row C11): its request
    /// gets an error (500, or a terminal SSE error event), nothing of it is sampled, and
    /// the loop goes on serving the others.
    fn fail_degenerate(&mut self, id: SeqId) {
        self.metrics.degenerate.inc();
        tracing::error!(
            seq = id.0,
            "degenerate output: non-finite logits; request failed"
        );
        if let Some(seq) = self.sched.finish(id) {
            self.endings
                .push((seq.extra.reply, SeqEvent::Failed(DEGENERATE_MESSAGE.into())));
        }
    }

    fn publish_load(&mut self) {
        let cache = self.sched.cache();
        let running = self.sched.running().len();
        let waiting = self.sched.waiting().count();
        self.metrics.running.set(running as i64);
        self.metrics.waiting.set(waiting as i64);
        self.metrics.kv_pages_used.set(cache.used_pages() as i64);
        self.metrics
            .kv_blocks_locked
            .set(cache.locked_blocks() as i64);
        self.metrics.prefill_tokens_per_s.set(self.rates.prefill);
        self.metrics.decode_tokens_per_s.set(self.rates.decode);
        let load = ReplicaLoad {
            running: running as u32,
            waiting: waiting as u32,
            queued_prefill_tokens: self.sched.queued_prefill_tokens(),
            kv_used_blocks: cache.used_pages() as u64,
            kv_total_blocks: cache.total_pages() as u64,
            prefill_tokens_per_s: self.rates.prefill,
            decode_tokens_per_s: self.rates.decode,
            steps: self.steps,
            // Filled in by the HTTP side, which measures the tier.
            tier_tokens_per_s: 0.0,
        };
        *self.shared.load.lock().unwrap_or_else(|e| e.into_inner()) = load;
    }
}
