//! How the one-token kernels ask for rows before they read them. They read a task's rows
//! one at a time, front to back, and at each group ask for one share of the bytes some
//! distance ahead, so every byte of the task is asked for once. The best hint and distance
//! differ between vendors, so each is the one measured there.

use std::sync::OnceLock;

use super::simd::{is_intel, prefetch, prefetch_l2};

/// Elsewhere (AMD): into L1, two rows ahead. On Zen 4 this streams Q8_0 rows about 1.5x
/// faster than tiles of eight rows at once (`examples/quant_prefill`, `LAYERS=24`).
const AHEAD_ROWS: usize = 2;

/// On Intel: into L2 only, 4 KiB ahead. An L1 prefetch holds one of the core's few
/// line-fill buffers for the whole trip to memory, and the loads queue behind it. On a Xeon
/// with AMX (one thread, `LAYERS=24`) the L2 hint alone streams rows 1.06-1.15x faster.
const INTEL_AHEAD_BYTES: usize = 4096;

/// One kernel call's prefetching: where to ask and how much per group.
#[derive(Clone, Copy)]
pub(super) struct RowsAhead {
    into_l2: bool,
    distance: usize,
    share: usize,
}

impl RowsAhead {
    /// For rows of `row_bytes` read in `groups` groups.
    pub(super) fn new(row_bytes: usize, groups: usize) -> Self {
        static INTEL: OnceLock<bool> = OnceLock::new();
        let into_l2 = *INTEL.get_or_init(is_intel);
        RowsAhead {
            into_l2,
            distance: if into_l2 {
                INTEL_AHEAD_BYTES
            } else {
                AHEAD_ROWS * row_bytes
            },
            share: row_bytes.div_ceil(groups).next_multiple_of(64),
        }
    }

    /// Where asking starts while the row at `row` is read. A hint: past the task's rows it
    /// asks for lines nobody reads, and never faults.
    pub(super) fn start(self, row: *const u8) -> *const u8 {
        row.wrapping_add(self.distance)
    }

    /// Asks for one group's share from `ahead`; returns where the next share starts.
    #[inline(always)]
    pub(super) fn ask(self, ahead: *const u8) -> *const u8 {
        let mut line = 0;
        while line < self.share {
            let p = ahead.wrapping_add(line);
            if self.into_l2 {
                prefetch_l2(p);
            } else {
                prefetch(p);
            }
            line += 64;
        }
        ahead.wrapping_add(self.share)
    }
}
