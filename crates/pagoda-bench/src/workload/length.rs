//! Token lengths given on the command line: a fixed `N` or a uniform range `MIN:MAX`.

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthSpec {
    pub min: u32,
    pub max: u32,
}

impl LengthSpec {
    pub fn fixed(n: u32) -> Self {
        Self { min: n, max: n }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u32 {
        if self.min == self.max {
            self.min
        } else {
            rng.random_range(self.min..=self.max)
        }
    }

    pub fn mean(&self) -> f64 {
        (f64::from(self.min) + f64::from(self.max)) / 2.0
    }
}

impl FromStr for LengthSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |part: &str| {
            part.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}` is not a length: expected N or MIN:MAX"))
        };
        let spec = match s.split_once(':') {
            Some((min, max)) => Self {
                min: parse(min)?,
                max: parse(max)?,
            },
            None => Self::fixed(parse(s)?),
        };
        if spec.min > spec.max {
            return Err(format!("`{s}`: MIN is larger than MAX"));
        }
        Ok(spec)
    }
}

impl std::fmt::Display for LengthSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}:{}", self.min, self.max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn parses_fixed_and_range() {
        assert_eq!("128".parse::<LengthSpec>().unwrap(), LengthSpec::fixed(128));
        assert_eq!(
            "16:64".parse::<LengthSpec>().unwrap(),
            LengthSpec { min: 16, max: 64 }
        );
        assert!("64:16".parse::<LengthSpec>().is_err());
        assert!("x".parse::<LengthSpec>().is_err());
    }

    #[test]
    fn samples_stay_inside_the_range() {
        let spec = LengthSpec { min: 3, max: 5 };
        let mut rng = StdRng::seed_from_u64(0);
        assert!((0..1000).all(|_| (3..=5).contains(&spec.sample(&mut rng))));
    }
}
