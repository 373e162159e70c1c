//! A small seeded RNG owned by each request.
//!
//! xoshiro256++ seeded through SplitMix64. Written here rather than taken from `rand` so that a
//! seed's stream can never change under a dependency upgrade: the same seed must give the same
//! tokens across releases, and each request draws only from its own generator, so the output does
//! not depend on what else is in the batch.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SamplerRng {
    pub fn from_seed(seed: u64) -> Self {
        let mut state = seed;
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        Self { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let mut a = SamplerRng::from_seed(7);
        let mut b = SamplerRng::from_seed(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(SamplerRng::from_seed(8).next_u64(), xs[0]);
    }

    #[test]
    fn the_stream_is_pinned_for_seed_zero() {
        // Pinned so an accidental change of generator shows up as a failing test.
        let mut rng = SamplerRng::from_seed(0);
        let first = rng.next_u64();
        let mut again = SamplerRng::from_seed(0);
        assert_eq!(again.next_u64(), first);
        assert_eq!(first, PINNED_SEED0_FIRST);
    }

    const PINNED_SEED0_FIRST: u64 = 5_987_356_902_031_041_503;

    #[test]
    fn seeding_uses_the_reference_splitmix64() {
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn floats_are_in_the_unit_interval() {
        let mut rng = SamplerRng::from_seed(1);
        for _ in 0..1000 {
            let x = rng.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
