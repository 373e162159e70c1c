//! A small Endpoint Picker for Pagoda replicas behind Envoy, speaking the Gateway API Inference
//! Extension's protocol: Envoy's `ext_proc` filter sends each request's headers and body, the
//! picker answers with `x-gateway-destination-endpoint: IP:PORT,IP:PORT,...` (best first), and
//! Envoy's `override_host` load balancing sends the request to the first and a retry to the
//! next (`envoy.yaml`).
//!
//! It scores replicas as llm-d's default profile does, from what Pagoda publishes: the queue
//! (`pagoda:num_requests_waiting` plus `_running`), KV-cache utilisation
//! (`pagoda:kv_cache_usage_perc`) and the longest cached prefix of the request, from each
//! replica's KV events. A replica whose
//! `/health` is not 200 (loading, draining) or that refuses connections gets nothing.
//!
//! Written for the end-to-end test and the routing benchmark; llm-d's own picker is what runs
//! in a cluster (docs/deploy.md).

mod ext_proc;
mod kv_index;
mod pods;
mod scoring;
mod tokens;

pub use ext_proc::{serve, PickerService};
pub use pods::{Pod, PodSnapshot, Pods};
pub use scoring::{rank, Mode, Weights};
pub use tokens::PrefixHasher;

/// The header Envoy routes on (the Inference Extension's name for it).
pub const DESTINATION_HEADER: &str = "x-gateway-destination-endpoint";
