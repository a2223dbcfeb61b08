//! Matrix products of a chunk of tokens (batched prefill): every row of a Q4 g64 matrix
//! against each token's activations, prepared once per chunk. Rows are split across
//! threads as in [`super::gemv`]; within a task, blocks of `BLOCK_ROWS` rows (whose codes
//! stay in the core's cache) meet the chunk a tile of [`TILE`] tokens at a time (whose
//! activations stay in cache across the block's rows, while each weight group is unpacked
//! once per tile in [`Kernel::tile`]).
//!
//! The tasks write `[row][token]`; the products come back transposed to `[token][row]`,
//! the layout the rest of the forward pass reads.

use super::acts::Acts;
use super::gemv::{for_row_chunks, rows_per_task};
use super::kernel::{Kernel, Rows, TILE};
use crate::cpu::ops::swiglu;

/// Rows per block within a task: 16 rows of a 2,560-wide matrix are 20 KiB of codes.
const BLOCK_ROWS: usize = 16;

/// Rows `first..first + rows` of `w` times every token of `acts`, into `out[row][token]`.
fn block(k: Kernel, w: Rows, first: usize, rows: usize, acts: &[Acts], out: &mut [f32]) {
    let rows = w.range(first, rows);
    for (i, tile) in acts.chunks(TILE).enumerate() {
        k.tile(rows, tile, &mut out[i * TILE..], acts.len());
    }
}

/// `out[t][r]` for the `rows` rows of a product over `n` tokens: `task(first_row, rows,
/// by_row)` fills blocks of rows `[row][token]`, the blocks' tasks split across threads;
/// then the whole is transposed into `out`.
fn product(
    rows: usize,
    n: usize,
    out: &mut [f32],
    task: impl Fn(usize, usize, &mut [f32]) + Sync + Send,
) {
    assert_eq!(out.len(), n * rows, "product output length");
    if n == 0 {
        return;
    }
    let mut by_row = vec![0.0f32; out.len()];
    for_row_chunks(
        &mut by_row,
        rows_per_task(rows) * n,
        |first_value, chunk| {
            let first = first_value / n;
            for (b, out) in chunk.chunks_mut(BLOCK_ROWS * n).enumerate() {
                task(first + b * BLOCK_ROWS, out.len() / n, out);
            }
        },
    );
    for (r, values) in by_row.chunks_exact(n).enumerate() {
        for (t, v) in values.iter().enumerate() {
            out[t * rows + r] = *v;
        }
    }
}

/// `out[t][r] ← (W · x_t)[r]` for each token's `x_t` (`out.len() == acts.len() · W.rows`).
pub fn gemm<'a>(k: Kernel, w: impl Into<Rows<'a>>, acts: &[Acts], out: &mut [f32]) {
    let w = w.into();
    product(w.rows, acts.len(), out, |first, rows, out| {
        block(k, w, first, rows, acts, out)
    });
}

/// `out[t] ← silu(Wgate · x_t) ⊙ (Wup · x_t)`, gate and up of a block computed by the same
/// task.
pub fn gemm_swiglu<'a>(
    k: Kernel,
    gate: impl Into<Rows<'a>>,
    up: impl Into<Rows<'a>>,
    acts: &[Acts],
    out: &mut [f32],
) {
    let (gate, up) = (gate.into(), up.into());
    assert_eq!(
        (gate.rows, gate.groups),
        (up.rows, up.groups),
        "gate and up shapes"
    );
    product(gate.rows, acts.len(), out, |first, rows, out| {
        let mut u = vec![0.0f32; out.len()];
        block(k, gate, first, rows, acts, out);
        block(k, up, first, rows, acts, &mut u);
        swiglu(out, &u);
    });
}
