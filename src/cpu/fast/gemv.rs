//! Matrix-vector products over Q4 g64 and Q8 g32 matrices ([`Rows`]) with int8 or f32 activations, rows split across
//! threads (the spinning pool of `pool.rs` natively, rayon in the threaded wasm build,
//! feature `wasm-threads`; in order in the single-threaded wasm build), and the fused
//! gate/up + SwiGLU product.

use super::acts::Acts;
use super::kernel::{Kernel, Rows};
use crate::cpu::ops::silu;
/// Fewest rows one task computes (below that the scheduling costs more than it saves).
const MIN_ROWS_PER_TASK: usize = 16;
/// Tasks per thread: a few, so a thread slowed by another process is compensated for.
const TASKS_PER_THREAD: usize = 4;
/// Rows of gate and up computed together before the SwiGLU (two stack buffers).
const SWIGLU_ROWS: usize = 64;

/// Threads the row split targets (in the threaded wasm build: the Web Workers of the pool
/// `initThreadPool` started).
pub fn threads() -> usize {
    #[cfg(any(not(target_arch = "wasm32"), feature = "wasm-threads"))]
    return rayon::current_num_threads();
    #[cfg(all(target_arch = "wasm32", not(feature = "wasm-threads")))]
    1
}

/// Rows per task for a matrix of `rows` rows.
pub fn rows_per_task(rows: usize) -> usize {
    rows.div_ceil(threads() * TASKS_PER_THREAD)
        .max(MIN_ROWS_PER_TASK)
}

/// Run `f` on one of rayon's threads in the threaded wasm build, so that the row splits
/// inside it fork from a pool thread that works on them itself. Called from outside the
/// pool, every split would wake the pool and put the caller to sleep until it is done: two
/// thread switches per GEMV (natively that was about a fifth of one-thread decode time,
/// docs/ARCHITECTURE.md). A decode step or prefill chunk pays them once. Natively `f` runs
/// here: the native pool (`pool.rs`) has the submitter work on its splits.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    #[cfg(all(target_arch = "wasm32", feature = "wasm-threads"))]
    if rayon::current_thread_index().is_none() {
        return rayon::scope(|_| f());
    }
    f()
}

/// `out`'s first element, shared by the tasks of a split (each writes its own chunk).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);

// SAFETY: the tasks of one split write disjoint chunks (below).
#[cfg(not(target_arch = "wasm32"))]
unsafe impl Sync for OutPtr {}

#[cfg(not(target_arch = "wasm32"))]
impl OutPtr {
    /// `len` values from `first` on.
    ///
    /// # Safety
    /// They must lie within the slice and no other live reference may reach them.
    #[allow(clippy::mut_from_ref)]
    unsafe fn chunk(&self, first: usize, len: usize) -> &mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(first), len)
    }
}

/// Run `task(first_row, chunk)` over consecutive chunks of `chunk_rows` rows of `out`:
/// in parallel on the native pool (`pool.rs`) or on rayon's threads (threaded wasm), in
/// order in the single-threaded wasm build.
pub fn for_row_chunks(
    out: &mut [f32],
    chunk_rows: usize,
    task: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    let chunk_rows = chunk_rows.max(1);
    #[cfg(not(target_arch = "wasm32"))]
    {
        let (len, rows) = (out.len(), OutPtr(out.as_mut_ptr()));
        super::pool::pool().run(len.div_ceil(chunk_rows), &|i| {
            let first = i * chunk_rows;
            // SAFETY: the pool runs each chunk index once, so the chunks are disjoint
            // ranges of `out`, which outlives the split.
            let chunk = unsafe { rows.chunk(first, chunk_rows.min(len - first)) };
            task(first, chunk)
        });
    }
    #[cfg(all(target_arch = "wasm32", feature = "wasm-threads"))]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(chunk_rows)
            .enumerate()
            .for_each(|(i, chunk)| task(i * chunk_rows, chunk));
    }
    #[cfg(all(target_arch = "wasm32", not(feature = "wasm-threads")))]
    for (i, chunk) in out.chunks_mut(chunk_rows).enumerate() {
        task(i * chunk_rows, chunk);
    }
}

/// Rows `first..first + out.len()` of `w` times `acts`.
fn rows_of(k: Kernel, w: Rows, first: usize, acts: &Acts, out: &mut [f32]) {
    k.rows(w.range(first, out.len()), acts, out);
}

/// `out ← W · x` (`out.len() == W.rows`, `acts` quantized from `x`, `W.cols` long).
pub fn gemv<'a>(k: Kernel, w: impl Into<Rows<'a>>, acts: &Acts, out: &mut [f32]) {
    let w = w.into();
    assert_eq!(out.len(), w.rows, "gemv output length");
    for_row_chunks(out, rows_per_task(w.rows), |first, chunk| {
        rows_of(k, w, first, acts, chunk)
    });
}

/// `out ← silu(Wgate · x) ⊙ (Wup · x)`, both products computed by the same task.
pub fn gemv_swiglu<'a>(
    k: Kernel,
    gate: impl Into<Rows<'a>>,
    up: impl Into<Rows<'a>>,
    acts: &Acts,
    out: &mut [f32],
) {
    let (gate, up) = (gate.into(), up.into());
    assert_eq!(
        (gate.rows, gate.groups),
        (up.rows, up.groups),
        "gate and up shapes"
    );
    assert_eq!(out.len(), gate.rows, "gemv_swiglu output length");
    for_row_chunks(out, rows_per_task(gate.rows), |first, chunk| {
        let mut u = [0.0f32; SWIGLU_ROWS];
        for (i, part) in chunk.chunks_mut(SWIGLU_ROWS).enumerate() {
            let row = first + i * SWIGLU_ROWS;
            let u = &mut u[..part.len()];
            rows_of(k, gate, row, acts, part);
            rows_of(k, up, row, acts, u);
            for (g, u) in part.iter_mut().zip(u.iter()) {
                *g = silu(*g) * u;
            }
        }
    });
}
