//! Which instruction set the kernels run on, chosen once per process at run time, so one
//! portable binary uses what each x86-64 machine has. `PAGODA_KERNELS=scalar|avx2|avx512`
//! forces a path (tests and benchmarks compare them); a forced path the CPU lacks is refused
//! with a message rather than crashing on an illegal instruction. A `-vnni` path is its vector
//! path plus the byte dot-product instructions (`vpdpbusd`), which only the integer prefill
//! kernels use; every other kernel runs its vector path's code. `avx512-amx` adds Intel's
//! tile matrix instructions (AMX-INT8) to `avx512-vnni`, for the integer prefill of the formats
//! `quant_int_amx.rs` takes.

use std::sync::OnceLock;

/// A kernel path. Every path computes bitwise the same results (see `simd.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    /// AVX2 + FMA + F16C (every x86-64 CPU since 2013-2015).
    Avx2,
    /// AVX2 with AVX-VNNI (Intel since Alder Lake and Sapphire Rapids, AMD since Zen 5).
    Avx2Vnni,
    /// AVX-512 F/BW/VL on top of the AVX2 set.
    Avx512,
    /// AVX-512 with AVX512-VNNI (Intel since Cascade Lake, AMD since Zen 4).
    Avx512Vnni,
    /// AVX-512 VNNI with AMX-INT8 tiles (Intel Xeon since Sapphire Rapids), where the kernel
    /// lets the process use them.
    Avx512Amx,
}

pub const ENV_VAR: &str = "PAGODA_KERNELS";

impl Isa {
    pub const ALL: [Isa; 6] = [
        Isa::Scalar,
        Isa::Avx2,
        Isa::Avx2Vnni,
        Isa::Avx512,
        Isa::Avx512Vnni,
        Isa::Avx512Amx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx2Vnni => "avx2-vnni",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Avx512Amx => "avx512-amx",
        }
    }

    /// The path without its dot-product extension: what every kernel but the integer
    /// prefill runs.
    pub fn vector(self) -> Isa {
        match self {
            Isa::Avx2Vnni => Isa::Avx2,
            Isa::Avx512Vnni | Isa::Avx512Amx => Isa::Avx512,
            isa => isa,
        }
    }

    /// The path without its tile extension: what every kernel but the AMX prefill runs.
    pub fn without_amx(self) -> Isa {
        match self {
            Isa::Avx512Amx => Isa::Avx512Vnni,
            isa => isa,
        }
    }

    pub fn parse(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.name() == name)
    }

    /// Whether this CPU can run the path.
    pub fn is_supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_supported()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Vnni => Isa::Avx2.is_supported() && is_x86_feature_detected!("avxvnni"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => Isa::Avx512.is_supported() && is_x86_feature_detected!("avx512vnni"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Amx => Isa::Avx512Vnni.is_supported() && super::quant_int_amx::available(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The widest path this CPU supports.
    pub fn best() -> Isa {
        *[
            Isa::Avx512Amx,
            Isa::Avx512Vnni,
            Isa::Avx512,
            Isa::Avx2Vnni,
            Isa::Avx2,
        ]
        .iter()
        .find(|isa| isa.is_supported())
        .unwrap_or(&Isa::Scalar)
    }

    /// The paths this CPU supports, narrowest first.
    pub fn supported() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_supported()).collect()
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads the override: `Ok(None)` when unset, an error line when it names no path or one this
/// CPU cannot run.
pub fn requested(value: Option<&str>) -> Result<Option<Isa>, String> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let isa = Isa::parse(value)
        .ok_or_else(|| format!("{ENV_VAR}={value}: expected one of {}", names()))?;
    if !isa.is_supported() {
        return Err(format!(
            "{ENV_VAR}={value}: this CPU does not support {isa} (it supports {})",
            Isa::supported()
                .iter()
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Some(isa))
}

fn names() -> String {
    Isa::ALL.map(Isa::name).join(", ")
}

static CHOSEN: OnceLock<Isa> = OnceLock::new();

/// The path every kernel call uses: the override if set and valid, else the best supported.
/// An invalid override is reported once on stderr and the best path used (`check_env` lets
/// the binary refuse it up front instead).
pub fn isa() -> Isa {
    *CHOSEN.get_or_init(|| match requested(std::env::var(ENV_VAR).ok().as_deref()) {
        Ok(Some(isa)) => isa,
        Ok(None) => Isa::best(),
        Err(message) => {
            eprintln!("{message}; using {}", Isa::best());
            Isa::best()
        }
    })
}

/// Validates the environment override, for commands that want a bad value to be an error.
pub fn check_env() -> Result<Isa, String> {
    requested(std::env::var(ENV_VAR).ok().as_deref())?;
    Ok(isa())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_parsing() {
        assert_eq!(requested(None), Ok(None));
        assert_eq!(requested(Some(" ")), Ok(None));
        assert_eq!(requested(Some("scalar")), Ok(Some(Isa::Scalar)));
        assert!(requested(Some("sse9"))
            .unwrap_err()
            .contains("expected one of"));
        for isa in Isa::ALL {
            let got = requested(Some(isa.name()));
            assert_eq!(got.is_ok(), isa.is_supported(), "{isa}: {got:?}");
        }
    }

    #[test]
    fn best_is_supported() {
        assert!(Isa::best().is_supported());
        assert!(Isa::supported().contains(&Isa::best()));
    }
}
