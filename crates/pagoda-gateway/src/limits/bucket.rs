//! A token bucket per minute-rate: full at `limit`, refilled continuously at limit/60 per
//! second, so a burst of a whole minute's allowance is possible but never more.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Bucket {
    level: f64,
    last_ms: i64,
}

impl Bucket {
    pub fn full(limit: u64, now_ms: i64) -> Bucket {
        Bucket {
            level: limit as f64,
            last_ms: now_ms,
        }
    }

    fn refill(&mut self, limit: u64, now_ms: i64) {
        let elapsed = (now_ms - self.last_ms).max(0) as f64;
        self.level = (self.level + elapsed * limit as f64 / 60_000.0).min(limit as f64);
        self.last_ms = now_ms.max(self.last_ms);
    }

    /// `Ok` if `amount` is available now (nothing is taken), else how long until it will be.
    pub fn check(&mut self, limit: u64, amount: u64, now_ms: i64) -> Result<(), Duration> {
        self.refill(limit, now_ms);
        if amount > limit {
            // It will never fit; a minute is the honest answer to "when".
            return Err(Duration::from_secs(60));
        }
        let missing = amount as f64 - self.level;
        if missing <= 0.0 {
            return Ok(());
        }
        let ms = (missing * 60_000.0 / limit.max(1) as f64).ceil() as u64;
        Err(Duration::from_millis(ms.max(1)))
    }

    pub fn take(&mut self, amount: u64) {
        self.level -= amount as f64;
    }

    pub fn give_back(&mut self, limit: u64, amount: u64, now_ms: i64) {
        self.refill(limit, now_ms);
        self.level = (self.level + amount as f64).min(limit as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_minute_then_refills_at_the_rate() {
        let mut b = Bucket::full(60, 0);
        for _ in 0..60 {
            b.check(60, 1, 0).unwrap();
            b.take(1);
        }
        let wait = b.check(60, 1, 0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(1));
        assert!(b.check(60, 1, 999).is_err());
        assert!(b.check(60, 1, 1000).is_ok());
        assert_eq!(b.check(60, 61, 1000).unwrap_err(), Duration::from_secs(60));
        b.give_back(60, 100, 1000);
        assert!(b.check(60, 60, 1000).is_ok());
    }
}
