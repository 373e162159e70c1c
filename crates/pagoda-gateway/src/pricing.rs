//! Per-model prices and the bill of one request. Money is `Decimal` end to end: a float would
//! drift when millions of tiny costs are summed.

use rust_decimal::Decimal;
use serde::Deserialize;

/// Prices per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input: Decimal,
    /// Prompt tokens served from the prefix cache; defaults to the input price.
    pub cached_input: Option<Decimal>,
    pub output: Decimal,
}

/// Token counts of one request. `cached` is part of `prompt`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt: u64,
    pub cached: u64,
    pub completion: u64,
}

const PER: u64 = 1_000_000;

impl ModelPrice {
    fn cached_price(&self) -> Decimal {
        self.cached_input.unwrap_or(self.input)
    }

    /// Uncached prompt tokens at the input price, cached ones once at the cached price,
    /// output at the output price.
    pub fn cost(&self, usage: TokenUsage) -> Decimal {
        let cached = usage.cached.min(usage.prompt);
        let fresh = usage.prompt - cached;
        (Decimal::from(fresh) * self.input
            + Decimal::from(cached) * self.cached_price()
            + Decimal::from(usage.completion) * self.output)
            / Decimal::from(PER)
    }

    /// The most a request can cost before anything is known about its cache hits: every
    /// prompt token at the dearer of the two input prices, and all `max_tokens`.
    pub fn max_cost(&self, prompt: u64, max_completion: u64) -> Decimal {
        let input = self.input.max(self.cached_price());
        (Decimal::from(prompt) * input + Decimal::from(max_completion) * self.output)
            / Decimal::from(PER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn cached_tokens_are_billed_once_at_the_cached_rate() {
        let price = ModelPrice {
            input: d("0.50"),
            cached_input: Some(d("0.05")),
            output: d("1.50"),
        };
        // 1000 prompt tokens of which 600 cached, 200 output:
        // 400 * 0.50 + 600 * 0.05 + 200 * 1.50 = 200 + 30 + 300 = 530 per million.
        let usage = TokenUsage {
            prompt: 1000,
            cached: 600,
            completion: 200,
        };
        assert_eq!(price.cost(usage), d("0.00053"));
        assert_eq!(price.max_cost(1000, 200), d("0.0008"));
        // Without a cached price, cached tokens cost what fresh ones do.
        let flat = ModelPrice {
            cached_input: None,
            ..price.clone()
        };
        assert_eq!(flat.cost(usage), d("0.0008"));
        // Sums stay exact where binary floats would not: a million one-token requests.
        let one = price.cost(TokenUsage {
            prompt: 1,
            cached: 0,
            completion: 0,
        });
        assert_eq!(one * Decimal::from(1_000_000u64), d("0.5"));
        let sum = (0..1_000_000).fold(Decimal::ZERO, |acc, _| acc + one);
        assert_eq!(sum, d("0.5"));
    }
}
