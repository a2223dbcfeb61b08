// The embedding gathers' table access (embed_q4.wgsl, embed_prefill.wgsl): a table whose
// codes exceed a storage binding (a Q8 table of Qwen's 151,936 × 896) is bound in two
// parts, rows from SPLIT on in codes_hi / qparams_hi; a table in one part binds it twice
// and SPLIT stays past its last row.

override SPLIT: u32 = 0xFFFFFFFFu;

@group(0) @binding(5) var<storage, read> codes_hi: array<u32>;
@group(0) @binding(6) var<storage, read> qparams_hi: array<u32>;

// Code word `w` of row `row` (`per_row` words a row).
fn code_word(row: u32, per_row: u32, w: u32) -> u32 {
    if (row < SPLIT) {
        return codes[row * per_row + w];
    }
    return codes_hi[(row - SPLIT) * per_row + w];
}

// Qparams (scales) word `w` of row `row` (`per_row` words a row).
fn param_word(row: u32, per_row: u32, w: u32) -> u32 {
    if (row < SPLIT) {
        return qparams[row * per_row + w];
    }
    return qparams_hi[(row - SPLIT) * per_row + w];
}
