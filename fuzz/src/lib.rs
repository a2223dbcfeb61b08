//! Helpers the fuzz targets share.

/// Cuts `data` into consecutive chunks whose sizes cycle through sizes picked by `pick` (a
/// byte of the input), so a streaming parser sees its input split everywhere: single
/// bytes, odd sizes, large pieces.
pub fn chunks(data: &[u8], pick: u8) -> impl Iterator<Item = &[u8]> {
    const SIZES: [usize; 8] = [1, 2, 3, 7, 64, 255, 4093, 65_536];
    let mut i = pick as usize;
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = SIZES[i % SIZES.len()].min(rest.len());
        i = i.wrapping_mul(5).wrapping_add(1);
        let (now, later) = rest.split_at(n);
        rest = later;
        Some(now)
    })
}

/// Splits `data` at its first NUL: (before, after); all of it and nothing without one.
pub fn split_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}
