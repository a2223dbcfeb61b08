//! `/metrics`: the server's counters in Prometheus' text format (version 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters shared by the routes and the model thread.
#[derive(Default)]
pub(super) struct Metrics {
    /// (route, status) → requests answered.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens whose K/V a slot already held (not processed again).
    pub cached_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    pub prompt_micros: AtomicU64,
    pub generate_micros: AtomicU64,
    pub ttft_micros: AtomicU64,
    pub generations: AtomicU64,
    /// Requests waiting for the model thread.
    pub queued: AtomicI64,
    /// Requests being generated (0 or 1: one model thread).
    pub active: AtomicI64,
    /// Generations stopped because their client went away or timed out.
    pub aborted: AtomicU64,
    /// The last generation's decode speed (f64 bits).
    pub last_tok_s: AtomicU64,
    /// Slot API saves and restores that succeeded.
    pub slot_saves: AtomicU64,
    pub slot_restores: AtomicU64,
    /// `--prefix-cache` snapshots written, and restored into a slot.
    pub prefix_saves: AtomicU64,
    pub prefix_restores: AtomicU64,
}

impl Metrics {
    pub fn request(&self, route: &'static str, status: u16) {
        let mut r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *r.entry((route, status)).or_default() += 1;
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The text `/metrics` answers, with `slots` KV cache slots.
    pub fn render(&self, slots: usize) -> String {
        let mut out = String::new();
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP pocketrt_requests_total HTTP requests answered."
        );
        let _ = writeln!(out, "# TYPE pocketrt_requests_total counter");
        for ((route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "pocketrt_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let secs = |c: &AtomicU64| get(c) as f64 / 1e6;
        let rows: [(&str, &str, &str, f64); 15] = [
            (
                "prompt_tokens_total",
                "counter",
                "Prompt tokens of answered requests.",
                get(&self.prompt_tokens) as f64,
            ),
            (
                "prompt_tokens_cached_total",
                "counter",
                "Prompt tokens reused from a KV cache slot.",
                get(&self.cached_tokens) as f64,
            ),
            (
                "completion_tokens_total",
                "counter",
                "Tokens generated.",
                get(&self.completion_tokens) as f64,
            ),
            (
                "prompt_seconds_total",
                "counter",
                "Time spent processing prompts.",
                secs(&self.prompt_micros),
            ),
            (
                "generate_seconds_total",
                "counter",
                "Time spent generating.",
                secs(&self.generate_micros),
            ),
            (
                "time_to_first_token_seconds_total",
                "counter",
                "Queue and prompt time to each request's first token, summed.",
                secs(&self.ttft_micros),
            ),
            (
                "generations_total",
                "counter",
                "Generations run.",
                get(&self.generations) as f64,
            ),
            (
                "requests_aborted_total",
                "counter",
                "Generations stopped because the client went away or timed out.",
                get(&self.aborted) as f64,
            ),
            (
                "queue_length",
                "gauge",
                "Requests waiting for the model.",
                self.queued.load(Ordering::Relaxed) as f64,
            ),
            (
                "requests_active",
                "gauge",
                "Requests being generated.",
                self.active.load(Ordering::Relaxed) as f64,
            ),
            (
                "tokens_per_second",
                "gauge",
                "Decode speed of the last generation.",
                f64::from_bits(get(&self.last_tok_s)),
            ),
            (
                "slot_saves_total",
                "counter",
                "Slots saved to a file (POST /slots/{id}?action=save).",
                get(&self.slot_saves) as f64,
            ),
            (
                "slot_restores_total",
                "counter",
                "Slots restored from a file (POST /slots/{id}?action=restore).",
                get(&self.slot_restores) as f64,
            ),
            (
                "prefix_cache_saves_total",
                "counter",
                "System prefixes saved to the prefix cache.",
                get(&self.prefix_saves) as f64,
            ),
            (
                "prefix_cache_restores_total",
                "counter",
                "System prefixes restored from the prefix cache into a slot.",
                get(&self.prefix_restores) as f64,
            ),
        ];
        for (name, kind, help, value) in rows {
            let _ = writeln!(out, "# HELP pocketrt_{name} {help}");
            let _ = writeln!(out, "# TYPE pocketrt_{name} {kind}");
            let _ = writeln!(out, "pocketrt_{name} {value}");
        }
        let _ = writeln!(out, "# HELP pocketrt_kv_slots KV cache slots (--parallel).");
        let _ = writeln!(out, "# TYPE pocketrt_kv_slots gauge");
        let _ = writeln!(out, "pocketrt_kv_slots {slots}");
        out
    }
}
