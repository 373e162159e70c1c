//! ggml tensor types: their ids in the file and their block geometry.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    IQ4NL,
    IQ4XS,
    IQ2XXS,
    IQ2XS,
    IQ3XXS,
    IQ1S,
    IQ3S,
    IQ2S,
    IQ1M,
    /// A type Pagoda does not run (kept so the error can name it).
    Other(u32),
}

impl TensorType {
    pub fn from_id(id: u32) -> TensorType {
        match id {
            0 => TensorType::F32,
            1 => TensorType::F16,
            2 => TensorType::Q4_0,
            3 => TensorType::Q4_1,
            6 => TensorType::Q5_0,
            7 => TensorType::Q5_1,
            8 => TensorType::Q8_0,
            10 => TensorType::Q2K,
            11 => TensorType::Q3K,
            12 => TensorType::Q4K,
            13 => TensorType::Q5K,
            14 => TensorType::Q6K,
            20 => TensorType::IQ4NL,
            23 => TensorType::IQ4XS,
            16 => TensorType::IQ2XXS,
            17 => TensorType::IQ2XS,
            18 => TensorType::IQ3XXS,
            19 => TensorType::IQ1S,
            21 => TensorType::IQ3S,
            22 => TensorType::IQ2S,
            29 => TensorType::IQ1M,
            30 => TensorType::BF16,
            other => TensorType::Other(other),
        }
    }

    /// The id the file stores (the inverse of `from_id`).
    pub fn id(self) -> u32 {
        match self {
            TensorType::F32 => 0,
            TensorType::F16 => 1,
            TensorType::Q4_0 => 2,
            TensorType::Q4_1 => 3,
            TensorType::Q5_0 => 6,
            TensorType::Q5_1 => 7,
            TensorType::Q8_0 => 8,
            TensorType::Q2K => 10,
            TensorType::Q3K => 11,
            TensorType::Q4K => 12,
            TensorType::Q5K => 13,
            TensorType::Q6K => 14,
            TensorType::IQ4NL => 20,
            TensorType::IQ4XS => 23,
            TensorType::IQ2XXS => 16,
            TensorType::IQ2XS => 17,
            TensorType::IQ3XXS => 18,
            TensorType::IQ1S => 19,
            TensorType::IQ3S => 21,
            TensorType::IQ2S => 22,
            TensorType::IQ1M => 29,
            TensorType::BF16 => 30,
            TensorType::Other(id) => id,
        }
    }

    /// ggml's name for the type (what llama.cpp prints).
    pub fn name(self) -> String {
        let known = match self {
            TensorType::F32 => "F32",
            TensorType::F16 => "F16",
            TensorType::BF16 => "BF16",
            TensorType::Q4_0 => "Q4_0",
            TensorType::Q4_1 => "Q4_1",
            TensorType::Q5_0 => "Q5_0",
            TensorType::Q5_1 => "Q5_1",
            TensorType::Q8_0 => "Q8_0",
            TensorType::Q2K => "Q2_K",
            TensorType::Q3K => "Q3_K",
            TensorType::Q4K => "Q4_K",
            TensorType::Q5K => "Q5_K",
            TensorType::Q6K => "Q6_K",
            TensorType::IQ4NL => "IQ4_NL",
            TensorType::IQ4XS => "IQ4_XS",
            TensorType::IQ2XXS => "IQ2_XXS",
            TensorType::IQ2XS => "IQ2_XS",
            TensorType::IQ3XXS => "IQ3_XXS",
            TensorType::IQ1S => "IQ1_S",
            TensorType::IQ3S => "IQ3_S",
            TensorType::IQ2S => "IQ2_S",
            TensorType::IQ1M => "IQ1_M",
            TensorType::Other(id) => return other_name(id),
        };
        known.to_string()
    }

    /// `(values per block, bytes per block)`; `None` for types Pagoda does not know.
    pub fn block(self) -> Option<(usize, usize)> {
        match self {
            TensorType::F32 => Some((1, 4)),
            TensorType::F16 | TensorType::BF16 => Some((1, 2)),
            TensorType::Q4_0 => Some((32, 18)),
            TensorType::Q4_1 => Some((32, 20)),
            TensorType::Q5_0 => Some((32, 22)),
            TensorType::Q5_1 => Some((32, 24)),
            TensorType::Q8_0 => Some((32, 34)),
            TensorType::Q2K => Some((256, 84)),
            TensorType::Q3K => Some((256, 110)),
            TensorType::Q4K => Some((256, 144)),
            TensorType::Q5K => Some((256, 176)),
            TensorType::Q6K => Some((256, 210)),
            TensorType::IQ4NL => Some((32, 18)),
            TensorType::IQ4XS => Some((256, 136)),
            TensorType::IQ2XXS => Some((256, 66)),
            TensorType::IQ2XS => Some((256, 74)),
            TensorType::IQ3XXS => Some((256, 98)),
            TensorType::IQ1S => Some((256, 50)),
            TensorType::IQ3S => Some((256, 110)),
            TensorType::IQ2S => Some((256, 82)),
            TensorType::IQ1M => Some((256, 56)),
            TensorType::Other(_) => None,
        }
    }

    pub fn is_quantized(self) -> bool {
        !matches!(self, TensorType::F32 | TensorType::F16 | TensorType::BF16)
    }
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Names of the ggml types Pagoda does not run, so an error can say what the file holds.
fn other_name(id: u32) -> String {
    let name = match id {
        9 => "Q8_1",
        15 => "Q8_K",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return format!("ggml type {id}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_every_type_is_named() {
        for id in 0..64 {
            let t = TensorType::from_id(id);
            assert_eq!(t.id(), id);
            if t.block().is_some() {
                assert!(!matches!(t, TensorType::Other(_)), "{id}");
            }
        }
        assert_eq!(TensorType::from_id(29).name(), "IQ1_M");
        assert_eq!(TensorType::from_id(29).block(), Some((256, 56)));
        // Still refused, by name.
        for (id, name) in [(34, "TQ1_0"), (35, "TQ2_0"), (39, "MXFP4")] {
            assert_eq!(TensorType::from_id(id), TensorType::Other(id));
            assert_eq!(TensorType::from_id(id).name(), name);
        }
    }
}
