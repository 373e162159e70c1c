//! Which replica gets a request: pure arithmetic over snapshots, tested exactly.

use crate::pods::PodSnapshot;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Queue, KV utilisation and prefix match, weighted (llm-d's default profile).
    PrefixAware,
    /// Ready replicas in turn (the baseline).
    RoundRobin,
}

/// Scorer weights. llm-d's default profile weighs the prefix scorer above the load scorers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    pub prefix: f64,
    pub queue: f64,
    pub kv_usage: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            prefix: 3.0,
            queue: 1.0,
            kv_usage: 1.0,
        }
    }
}

/// The ready replicas, best first. `matched[i]` is the number of the request's leading blocks
/// replica `i` holds, out of `num_blocks`; `turn` counts requests: round robin starts the
/// order there, and equal scores keep that rotation, so equal replicas share the load.
pub fn rank(
    pods: &[PodSnapshot],
    matched: &[usize],
    num_blocks: usize,
    mode: Mode,
    weights: Weights,
    turn: usize,
) -> Vec<usize> {
    let ready: Vec<usize> = (0..pods.len()).filter(|&i| pods[i].ready).collect();
    if ready.is_empty() {
        return ready;
    }
    let start = turn % ready.len();
    let mut order: Vec<usize> = ready[start..]
        .iter()
        .chain(&ready[..start])
        .copied()
        .collect();
    if mode == Mode::RoundRobin {
        return order;
    }
    // Each scorer maps to [0, 1], higher is better; the queue is scaled by the longest one.
    let max_queue = ready.iter().map(|&i| pods[i].queue).fold(0.0, f64::max);
    let score = |i: usize| {
        let prefix = if num_blocks == 0 {
            0.0
        } else {
            matched[i] as f64 / num_blocks as f64
        };
        let queue = if max_queue > 0.0 {
            1.0 - pods[i].queue / max_queue
        } else {
            1.0
        };
        let kv = 1.0 - pods[i].kv_usage.clamp(0.0, 1.0);
        weights.prefix * prefix + weights.queue * queue + weights.kv_usage * kv
    };
    // A stable sort: equal scores stay in rotation order.
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replica `pick` tries first.
    fn choose(
        pods: &[PodSnapshot],
        matched: &[usize],
        num_blocks: usize,
        mode: Mode,
        weights: Weights,
        turn: usize,
    ) -> Option<usize> {
        rank(pods, matched, num_blocks, mode, weights, turn)
            .first()
            .copied()
    }

    fn pod(ready: bool, queue: f64, kv_usage: f64) -> PodSnapshot {
        PodSnapshot {
            ready,
            queue,
            kv_usage,
        }
    }

    #[test]
    fn the_replica_holding_the_prefix_wins_unless_it_is_much_busier() {
        let pods = [
            pod(true, 0.0, 0.1),
            pod(true, 0.0, 0.1),
            pod(true, 0.0, 0.1),
        ];
        let w = Weights::default();
        assert_eq!(
            choose(&pods, &[0, 3, 1], 4, Mode::PrefixAware, w, 0),
            Some(1)
        );
        // The longest queue and a full cache cost 2; a prefix of 3 blocks in 4 is worth 2.25,
        // one block in 4 only 0.75.
        let pods = [
            pod(true, 0.0, 0.0),
            pod(true, 10.0, 1.0),
            pod(true, 0.0, 0.0),
        ];
        assert_eq!(
            choose(&pods, &[0, 3, 0], 4, Mode::PrefixAware, w, 0),
            Some(1)
        );
        assert_eq!(
            choose(&pods, &[0, 1, 0], 4, Mode::PrefixAware, w, 0),
            Some(0)
        );
    }

    #[test]
    fn only_ready_replicas_are_chosen_and_ties_rotate() {
        let pods = [
            pod(false, 0.0, 0.0),
            pod(true, 0.0, 0.0),
            pod(true, 0.0, 0.0),
        ];
        let w = Weights::default();
        let picks: Vec<_> = (0..4)
            .map(|t| choose(&pods, &[5, 0, 0], 5, Mode::PrefixAware, w, t).unwrap())
            .collect();
        assert_eq!(picks, [1, 2, 1, 2]);
        let rr: Vec<_> = (0..4)
            .map(|t| choose(&pods, &[0, 0, 0], 0, Mode::RoundRobin, w, t).unwrap())
            .collect();
        assert_eq!(rr, [1, 2, 1, 2]);
        let none = [pod(false, 0.0, 0.0)];
        assert_eq!(choose(&none, &[0], 0, Mode::PrefixAware, w, 0), None);
        // The rest of the ranking is the fallback order: best first, the unready left out.
        let pods = [
            pod(true, 0.0, 0.5),
            pod(false, 0.0, 0.0),
            pod(true, 0.0, 0.0),
        ];
        assert_eq!(rank(&pods, &[2, 2, 0], 2, Mode::PrefixAware, w, 0), [0, 2]);
    }
}
