//! A bounds-checked little-endian cursor over the file's bytes. A GGUF file may come from
//! anywhere, so every length is checked against what is left before anything is allocated.

use crate::value::MetaValue;

pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// Deepest nesting of arrays accepted (real files nest at most once).
const MAX_ARRAY_DEPTH: usize = 4;

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.remaining() {
            return Err(format!(
                "needs {n} bytes at offset {} but the file ends first",
                self.pos
            ));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("length taken"))
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count that needs at least `min_bytes_each` bytes per item to follow.
    pub fn count(&mut self, min_bytes_each: usize, what: &str) -> Result<usize, String> {
        let n = self.u64()?;
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_bytes_each.max(1)) <= self.remaining());
        fits.ok_or_else(|| format!("{what} count {n} is larger than the file"))
    }

    pub fn string(&mut self) -> Result<String, String> {
        let len = self.count(1, "string byte")?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("string at offset {} is not UTF-8", self.pos - len))
    }

    pub fn value(&mut self, type_id: u32, depth: usize) -> Result<MetaValue, String> {
        Ok(match type_id {
            0 => MetaValue::U8(self.array::<1>()?[0]),
            1 => MetaValue::I8(self.array::<1>()?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array()?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array()?)),
            4 => MetaValue::U32(self.u32()?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array()?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(format!("bool value {b}")),
            },
            8 => MetaValue::String(self.string()?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err("arrays nested too deeply".into());
                }
                let item_type = self.u32()?;
                let len = self.count(min_size(item_type), "array item")?;
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(self.value(item_type, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64()?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array()?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(format!("unknown metadata value type {other}")),
        })
    }
}

/// The fewest bytes a value of a type occupies (strings and arrays carry a u64 length).
fn min_size(type_id: u32) -> usize {
    match type_id {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}
