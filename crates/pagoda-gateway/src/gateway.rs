//! The gateway as the server sees it: authenticate a bearer key, admit a request against
//! its tenant's policy and counters, meter it, answer usage queries.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;

use crate::alerts::Alerter;
use crate::clock::{now_ms, Period};
use crate::error::GatewayError;
use crate::ids::{KeyId, RequestId, TenantId};
use crate::keys::KeyStore;
use crate::limits::{Limiter, LocalLimiter, RedisLimiter, Reservation};
use crate::policy::{Policy, PolicyStore, TenantPolicy};
use crate::settlement::Settlement;
use crate::sink::{ClickHouseSink, JsonlSink, Sink, SinkSpec, SqliteSink};
use crate::stats::TenantStats;
use crate::ticket::{Ticket, TicketTerms};
use crate::usage::{UsageQuery, UsageRow};

/// Who is calling: set on each authenticated request (the server puts it in the request's
/// extensions) so handlers and later layers can read the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    pub key_id: KeyId,
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Keys, and events with the default sink.
    pub db: PathBuf,
    /// Tenant policies and prices; without it every tenant is unlimited and nothing costs.
    pub policy: Option<PathBuf>,
    pub sink: SinkSpec,
    /// Shared counters for several replicas; in process without it.
    pub redis_url: Option<String>,
    /// How often the policy file is checked for changes.
    pub reload_every: Duration,
    /// What admission does while the metering store fails.
    pub metering_on_failure: MeteringFailure,
    /// With Redis: how long a request's concurrency lease outlives a replica that died
    /// without settling it. Longer than the longest request, or such a request stops counting.
    pub lease_ttl: Duration,
}

/// `--metering-on-failure`: while the metering store refuses writes (its events are kept
/// and retried either way), `Refuse` answers new requests 503, `Serve` goes on serving with
/// the events queued in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MeteringFailure {
    #[default]
    Refuse,
    Serve,
}

impl std::str::FromStr for MeteringFailure {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<MeteringFailure, GatewayError> {
        match s {
            "refuse" => Ok(MeteringFailure::Refuse),
            "serve" => Ok(MeteringFailure::Serve),
            _ => Err(GatewayError::invalid(
                "metering-on-failure",
                format!("`{s}` is not refuse or serve"),
            )),
        }
    }
}

impl GatewayConfig {
    pub fn new(db: PathBuf) -> GatewayConfig {
        GatewayConfig {
            db,
            policy: None,
            sink: SinkSpec::Sqlite(None),
            redis_url: None,
            reload_every: Duration::from_secs(2),
            metering_on_failure: MeteringFailure::Refuse,
            lease_ttl: Duration::from_secs(3600),
        }
    }
}

/// One prompt of a request as admission sees it; `max_tokens` may be lowered to the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedPrompt {
    pub prompt_tokens: usize,
    pub max_tokens: usize,
    /// Choices (`n`); they share the prompt.
    pub n: usize,
}

/// What an admitted request runs with.
pub struct Admitted {
    /// Engine priority of the tenant's class (lower runs first).
    pub priority: i32,
    /// The tenant's latency class (`TenantPolicy::slo_class`).
    pub slo_class: String,
    base_salt: String,
    pub ticket: Arc<Ticket>,
}

impl Admitted {
    /// The tenant's (or its sharing group's) salt, combined with the client's own if it sent
    /// one: the client can narrow sharing within its tenant but never reach another's
    /// entries. The name's length comes first so no two names can produce the same prefix.
    pub fn cache_salt(&self, client: Option<&str>) -> String {
        match client {
            Some(c) => format!("{}#{c}", self.base_salt),
            None => self.base_salt.clone(),
        }
    }

    /// The engine priority for a request that asked for `client` (if anything): a client may
    /// lower its priority below its class, not raise it.
    pub fn priority(&self, client: Option<i32>) -> i32 {
        client.map_or(self.priority, |c| c.max(self.priority))
    }
}

pub struct Gateway {
    keys: KeyStore,
    policy: Arc<PolicyStore>,
    /// Counters, alerts, stats and sink: what tickets settle into.
    settlement: Arc<Settlement>,
    metering_on_failure: MeteringFailure,
}

impl Gateway {
    pub async fn open(config: GatewayConfig) -> Result<Arc<Gateway>, GatewayError> {
        let keys = KeyStore::open(&config.db)?;
        let policy = match &config.policy {
            Some(path) => PolicyStore::load(path)?,
            None => PolicyStore::fixed(Policy::default()),
        };
        let sink = open_sink(&config.sink, &config.db)?;
        let limiter = match &config.redis_url {
            Some(url) => Limiter::Redis(RedisLimiter::connect(url, config.lease_ttl).await?),
            None => Limiter::Local(LocalLimiter::new()),
        };
        let gateway = Gateway::build(keys, policy, limiter, sink, config.metering_on_failure);
        // A metering store that cannot answer (ClickHouse down) must not keep the server
        // from starting; the counters then start from zero, which the log says.
        if let Err(e) = gateway.seed_spend().await {
            tracing::warn!(error = %e, "could not read this period's spend; budgets start from zero");
        }
        gateway.policy.watch(config.reload_every);
        Ok(gateway)
    }

    pub fn from_parts(
        keys: KeyStore,
        policy: PolicyStore,
        limiter: Limiter,
        sink: Sink,
    ) -> Arc<Gateway> {
        Gateway::build(keys, policy, limiter, sink, MeteringFailure::Refuse)
    }

    fn build(
        keys: KeyStore,
        policy: PolicyStore,
        limiter: Limiter,
        sink: Sink,
        metering_on_failure: MeteringFailure,
    ) -> Arc<Gateway> {
        Arc::new(Gateway {
            keys,
            policy: Arc::new(policy),
            settlement: Arc::new(Settlement {
                limiter,
                sink,
                alerts: Alerter::default(),
                stats: TenantStats::default(),
            }),
            metering_on_failure,
        })
    }

    /// In-process counters start from the spend already metered this day and month.
    async fn seed_spend(&self) -> Result<(), GatewayError> {
        let Limiter::Local(local) = &self.settlement.limiter else {
            return Ok(());
        };
        let now = now_ms();
        let spend = |from| {
            let query = UsageQuery {
                from_ms: Some(from),
                ..UsageQuery::default()
            };
            async move { self.settlement.sink.usage(&query).await }
        };
        let month = spend(Period::Month.start_ms(now)).await?;
        let day = spend(Period::Day.start_ms(now)).await?;
        for row in &month {
            let today = day
                .iter()
                .find(|d| d.tenant == row.tenant)
                .map_or(Decimal::ZERO, |d| d.cost);
            local.seed(
                &TenantId::new(row.tenant.clone()),
                Period::Day.key(now),
                today,
                Period::Month.key(now),
                row.cost,
            );
        }
        Ok(())
    }

    /// With `MeteringFailure::Refuse`, nothing is admitted while the store fails.
    fn check_metering(&self) -> Result<(), GatewayError> {
        if self.metering_on_failure == MeteringFailure::Refuse
            && self.settlement.sink.health().is_failing()
        {
            return Err(GatewayError::MeteringUnavailable);
        }
        Ok(())
    }

    /// Seeds a tenant's shared (Redis) spend of this day and month from the metering store,
    /// so a Redis that restarted empty does not hand out a fresh budget. A store that cannot
    /// answer refuses the request: the budget cannot be checked.
    async fn seed_shared_spend(&self, r: &Reservation, now: i64) -> Result<(), GatewayError> {
        let Limiter::Redis(redis) = &self.settlement.limiter else {
            return Ok(());
        };
        let spent = |from| {
            let query = UsageQuery {
                tenant: Some(r.tenant.to_string()),
                from_ms: Some(from),
                ..UsageQuery::default()
            };
            async move {
                let rows = self.settlement.sink.usage(&query).await?;
                Ok::<Decimal, GatewayError>(rows.iter().map(|row| row.cost).sum())
            }
        };
        let month = spent(Period::Month.start_ms(now)).await?;
        let day = spent(Period::Day.start_ms(now)).await?;
        tracing::info!(tenant = %r.tenant, %day, %month, "seeded the shared budget counters");
        redis.seed(r, day, month).await
    }

    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }

    pub fn policy(&self) -> Arc<Policy> {
        self.policy.current()
    }

    /// Re-reads the policy file now if it changed.
    pub fn reload_policy(&self) -> Result<bool, GatewayError> {
        self.policy.reload_if_changed()
    }

    /// Checks an `Authorization` header value.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, GatewayError> {
        let value = authorization.ok_or(GatewayError::MissingKey)?;
        let key = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or(GatewayError::InvalidKey)?
            .trim();
        let record = self.keys.authenticate(key)?;
        Ok(Caller {
            tenant: record.tenant,
            key_id: record.key_id,
        })
    }

    /// Usage of other tenants is for admin keys only.
    pub fn authorize_usage(&self, caller: &Caller) -> Result<(), GatewayError> {
        if self.policy().tenant(&caller.tenant).admin {
            Ok(())
        } else {
            Err(GatewayError::Forbidden(
                "usage queries need a key of an admin tenant".into(),
            ))
        }
    }

    /// Applies the tenant's caps to `prompts` (lowering max_tokens, refusing long prompts),
    /// checks the model, then reserves the request's worst case against its rates, its
    /// concurrency and its budget.
    pub async fn admit(
        self: &Arc<Self>,
        caller: &Caller,
        model: &str,
        prompts: &mut [PlannedPrompt],
    ) -> Result<Admitted, GatewayError> {
        self.admit_as(RequestId::random(), caller, model, prompts)
            .await
    }

    /// `admit`, with the request id the cost event will carry (the server passes its
    /// response id, so events join with what clients saw).
    pub async fn admit_as(
        self: &Arc<Self>,
        request_id: RequestId,
        caller: &Caller,
        model: &str,
        prompts: &mut [PlannedPrompt],
    ) -> Result<Admitted, GatewayError> {
        let result = self.try_admit(request_id, caller, model, prompts).await;
        if let Err(e) = &result {
            self.settlement
                .stats
                .refused(caller.tenant.as_str(), refusal_reason(e));
        }
        result
    }

    async fn try_admit(
        self: &Arc<Self>,
        request_id: RequestId,
        caller: &Caller,
        model: &str,
        prompts: &mut [PlannedPrompt],
    ) -> Result<Admitted, GatewayError> {
        self.check_metering()?;
        let policy = self.policy();
        let tenant = policy.tenant(&caller.tenant).clone();
        if !tenant.allows_model(model) {
            return Err(GatewayError::ModelForbidden {
                tenant: caller.tenant.to_string(),
                model: model.to_string(),
            });
        }
        if tenant.budget.is_some() && !policy.is_priced(model) {
            tracing::error!(%model, "refusing a request under a budget: the model has no price");
            return Err(GatewayError::Unpriced {
                model: model.to_string(),
            });
        }
        let sequences = check_sequences(&tenant, prompts)?;
        let mut prompt_total = 0u64;
        let mut completion_total = 0u64;
        for p in prompts.iter_mut() {
            if let Some(limit) = tenant.max_prompt_tokens {
                if p.prompt_tokens > limit {
                    return Err(GatewayError::PromptTooLong {
                        tokens: p.prompt_tokens,
                        limit,
                    });
                }
            }
            if let Some(cap) = tenant.max_tokens {
                p.max_tokens = p.max_tokens.min(cap);
            }
            // Saturating: a client's numbers must never wrap into a small reservation.
            prompt_total = prompt_total.saturating_add(p.prompt_tokens as u64);
            completion_total = completion_total
                .saturating_add((p.max_tokens as u64).saturating_mul(p.n.max(1) as u64));
        }
        let price = policy.price(model);
        let now = now_ms();
        let reservation = Reservation::new(
            caller.tenant.clone(),
            prompt_total + completion_total,
            price.max_cost(prompt_total, completion_total),
            now,
        )
        .with_sequences(sequences)
        .with_lease(request_id.as_str());
        // Alerts follow settled spend (`Ticket::settle`), not this reservation.
        match self
            .settlement
            .limiter
            .reserve(&tenant, &reservation, now)
            .await
        {
            Err(GatewayError::Unseeded) => {
                self.seed_shared_spend(&reservation, now).await?;
                self.settlement
                    .limiter
                    .reserve(&tenant, &reservation, now)
                    .await?;
            }
            other => {
                other?;
            }
        }
        let base_salt = match &tenant.cache_group {
            Some(group) => format!("g{}:{group}", group.len()),
            None => format!("t{}:{}", caller.tenant.as_str().len(), caller.tenant),
        };
        let shape: Vec<(usize, usize)> = prompts.iter().map(|p| (p.prompt_tokens, p.n)).collect();
        let priority = tenant.priority;
        let slo_class = tenant.slo_class.clone();
        let terms = TicketTerms {
            request_id,
            caller: caller.clone(),
            model: model.to_string(),
            reservation,
            policy: tenant,
            price,
            currency: policy.currency.clone(),
        };
        let ticket = Ticket::new(self.settlement.clone(), terms, &shape);
        Ok(Admitted {
            priority,
            slo_class,
            base_salt,
            ticket: Arc::new(ticket),
        })
    }

    /// The checks that need no token count, before the server spends CPU on guard scans,
    /// template rendering and tokenization: the key's model, the request's sequences against
    /// the tenant's concurrency limit, and (in process) whether the tenant is already out of
    /// request rate, token rate, concurrency or hard budget. Takes nothing: `admit` still
    /// checks and reserves atomically.
    pub fn precheck(
        &self,
        caller: &Caller,
        model: &str,
        prompts: &[PlannedPrompt],
    ) -> Result<(), GatewayError> {
        self.check_metering()?;
        let policy = self.policy();
        let tenant = policy.tenant(&caller.tenant);
        if !tenant.allows_model(model) {
            return Err(GatewayError::ModelForbidden {
                tenant: caller.tenant.to_string(),
                model: model.to_string(),
            });
        }
        let sequences = check_sequences(tenant, prompts)?;
        let result = match &self.settlement.limiter {
            Limiter::Local(l) => l.precheck(tenant, &caller.tenant, sequences, now_ms()),
            // Redis counters are checked by the one atomic script at admission.
            Limiter::Redis(_) => Ok(()),
        };
        if let Err(e) = &result {
            self.settlement
                .stats
                .refused(caller.tenant.as_str(), refusal_reason(e));
        }
        result
    }

    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, GatewayError> {
        self.settlement.sink.usage(query).await
    }

    /// Resolves when every event recorded so far is durable.
    pub async fn flush(&self) {
        self.settlement.sink.flush().await;
    }

    /// Appends the per-tenant Prometheus series and the metering sink's health.
    pub fn render_metrics(&self, out: &mut String) {
        self.settlement.stats.render(out);
        let health = self.settlement.sink.health();
        let _ = writeln!(out, "# HELP pagoda:gateway_sink_failing 1 while the metering store refuses writes (events stay queued).");
        let _ = writeln!(out, "# TYPE pagoda:gateway_sink_failing gauge");
        let _ = writeln!(
            out,
            "pagoda:gateway_sink_failing {}",
            u8::from(health.is_failing())
        );
        let _ = writeln!(
            out,
            "# HELP pagoda:gateway_sink_queued_events Cost events waiting for the metering store."
        );
        let _ = writeln!(out, "# TYPE pagoda:gateway_sink_queued_events gauge");
        let _ = writeln!(out, "pagoda:gateway_sink_queued_events {}", health.queued());
    }
}

pub fn open_sink(spec: &SinkSpec, db: &std::path::Path) -> Result<Sink, GatewayError> {
    Ok(match spec {
        SinkSpec::Sqlite(path) => Sink::Sqlite(SqliteSink::open(path.as_deref().unwrap_or(db))?),
        SinkSpec::Jsonl(path) => Sink::Jsonl(JsonlSink::open(path)?),
        // The spool sits beside the gateway database.
        SinkSpec::ClickHouse(url) => Sink::ClickHouse(ClickHouseSink::open(
            url,
            &db.with_extension("clickhouse-spool"),
        )?),
    })
}

fn refusal_reason(e: &GatewayError) -> &'static str {
    match e {
        GatewayError::RateLimited { .. } => "rate_limit",
        GatewayError::QuotaExhausted { .. } => "quota",
        GatewayError::ModelForbidden { .. } => "forbidden",
        _ => "invalid",
    }
}

/// The sequences a request runs at once (prompts x n); more than the tenant's concurrency
/// limit can never be admitted, so that is a bad request rather than a busy tenant.
fn check_sequences(tenant: &TenantPolicy, prompts: &[PlannedPrompt]) -> Result<u64, GatewayError> {
    let sequences = prompts
        .iter()
        .fold(0u64, |total, p| total.saturating_add(p.n.max(1) as u64));
    match tenant.max_concurrent {
        Some(max) if sequences > max => Err(GatewayError::invalid(
            "n",
            format!(
                "the request runs {sequences} sequences (prompts x n) at once; this key's limit is {max}"
            ),
        )),
        _ => Ok(sequences),
    }
}
