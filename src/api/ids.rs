//! Response and tool-call ids (`chatcmpl-…`, `call_…`) and the `created` time, without a
//! random-number dependency: a splitmix64 hash of the clock and a counter (unique within
//! a process, not secret).

use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Unix time in seconds.
pub fn now() -> u64 {
    web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A fresh seed: the clock's nanoseconds and a process-wide counter.
pub fn fresh_seed() -> u64 {
    let nanos = web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    splitmix(nanos ^ splitmix(COUNTER.fetch_add(1, Ordering::Relaxed)))
}

/// `prefix` and 24 letters and digits derived from `seed`.
pub fn random_id(prefix: &str, seed: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = seed;
    let mut id = String::from(prefix);
    for _ in 0..24 {
        state = splitmix(state);
        id.push(char::from(
            ALPHABET[(state % ALPHABET.len() as u64) as usize],
        ));
    }
    id
}
