//! Growable buffers whose first value starts a cache line.
//!
//! glibc places a large block 16 bytes past a page boundary, so in a `Vec<f32>` of products
//! every 16-value row tile a kernel stores spans two cache lines, and where two kernel
//! threads write neighbouring columns of the same rows, the line between them moves from
//! core to core on every store. On the AMX Xeon, putting the forward pass's products and
//! quantized activations on line boundaries ran the 896-wide Q8_0 products 10-17% faster on
//! one thread and on two (docs/benchmarks.md).

use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ops::{Deref, DerefMut};

/// Bytes of a cache line.
pub const LINE_BYTES: usize = 64;

/// Values an `AlignedVec` may hold.
///
/// # Safety
/// All-zero bytes are a valid value, every byte pattern the buffer is given is one, and the
/// type's alignment divides `LINE_BYTES`.
pub unsafe trait Plain: Copy + 'static {}

// SAFETY: plain numbers: every bit pattern is a value, zero bits are zero, aligned to at
// most 8.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for i8 {}
// SAFETY: as above.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for half::f16 {}
// SAFETY: as above.
unsafe impl Plain for half::bf16 {}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CacheLine([u8; LINE_BYTES]);

/// A `Vec<T>` whose values start on a cache line.
#[derive(Clone)]
pub struct AlignedVec<T: Plain> {
    lines: Vec<CacheLine>,
    len: usize,
    values: PhantomData<T>,
}

impl<T: Plain> AlignedVec<T> {
    pub const fn new() -> Self {
        const { assert!(LINE_BYTES.is_multiple_of(align_of::<T>()) && size_of::<T>() > 0) };
        AlignedVec {
            lines: Vec::new(),
            len: 0,
            values: PhantomData,
        }
    }

    /// `len` zeros.
    pub fn zeroed(len: usize) -> Self {
        let mut v = Self::new();
        v.resize_zeroed(len);
        v
    }

    /// Holds `len` values: the first of the old ones are kept, any new ones are zero.
    pub fn resize_zeroed(&mut self, len: usize) {
        let lines = (len * size_of::<T>()).div_ceil(LINE_BYTES);
        if len > self.len {
            // `lines` always holds exactly the old values' lines: zero the rest of the last
            // one; `resize` below zeroes whole lines past it.
            let old_end = self.len * size_of::<T>();
            let tail = old_end.next_multiple_of(LINE_BYTES) - old_end;
            // SAFETY: bytes `old_end..old_end + tail` are the last line's, inside `lines`.
            unsafe {
                let base = self.lines.as_mut_ptr() as *mut u8;
                std::ptr::write_bytes(base.add(old_end), 0, tail);
            }
        }
        self.lines.resize(lines, CacheLine([0; LINE_BYTES]));
        self.len = len;
    }

    /// The first `len` values, the buffer grown (zeroed) only when it is shorter.
    pub fn at_least(&mut self, len: usize) -> &mut [T] {
        if self.len < len {
            self.resize_zeroed(len);
        }
        &mut self[..len]
    }

    /// Values it holds without reallocating.
    pub fn capacity(&self) -> usize {
        self.lines.capacity() * LINE_BYTES / size_of::<T>()
    }
}

impl<T: Plain> Default for AlignedVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Plain> Deref for AlignedVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `lines` holds at least `len` values' bytes, all initialised (zeros or
        // values written through `deref_mut`), aligned for `T` (`Plain`).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const T, self.len) }
    }
}

impl<T: Plain> DerefMut for AlignedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `self` is borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut T, self.len) }
    }
}

impl<T: Plain + PartialEq> PartialEq for AlignedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for AlignedVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_start_on_a_line_and_growth_is_zero() {
        let mut v: AlignedVec<f32> = AlignedVec::zeroed(5);
        assert_eq!(v.as_ptr() as usize % LINE_BYTES, 0);
        assert_eq!(&*v, &[0.0; 5]);
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = i as f32 + 1.0);
        // Shrink inside a line, then grow past it: the dropped values come back as zeros.
        v.resize_zeroed(2);
        assert_eq!(&*v, &[1.0, 2.0]);
        v.resize_zeroed(40);
        assert_eq!(v.as_ptr() as usize % LINE_BYTES, 0);
        assert_eq!(&v[..2], &[1.0, 2.0]);
        assert!(v[2..].iter().all(|&x| x == 0.0));
        // Whole lines dropped and taken back are zeros too.
        v.iter_mut().for_each(|x| *x = 7.0);
        v.resize_zeroed(3);
        v.resize_zeroed(40);
        assert_eq!(&v[..3], &[7.0; 3]);
        assert!(v[3..].iter().all(|&x| x == 0.0));
        assert!(v.capacity() >= 40);
    }

    #[test]
    fn at_least_keeps_a_longer_buffer_whole() {
        let mut v: AlignedVec<i8> = AlignedVec::zeroed(100);
        v.iter_mut().for_each(|x| *x = 3);
        assert_eq!(v.at_least(10).len(), 10);
        assert_eq!(v.len(), 100);
        assert!(v.iter().all(|&x| x == 3));
        assert_eq!(v.at_least(130).len(), 130);
        assert!(v[100..].iter().all(|&x| x == 0));
        let empty: AlignedVec<half::f16> = AlignedVec::default();
        assert!(empty.is_empty());
    }
}
