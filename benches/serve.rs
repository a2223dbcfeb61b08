//! `pocketrt serve` under load: 16 concurrent streaming clients × 4 requests each on the
//! Pocket-shape synthetic model (pocket-0.3b's shapes, random weights, a byte-pair
//! tokenizer covering its 65,536 ids) on the CPU backend, with `--parallel 1` and
//! `--parallel 4`. Each client continues its own prompt (every request is the last one's
//! plus a new question, after a system text all share; the random model's replies are
//! left out, they re-encode to many byte tokens). Prints
//! one JSON object: per setting, throughput (generated tokens / wall time) and p50/p99
//! time to the first streamed token.
//!
//!     cargo bench --bench serve [-- CLIENTS REQUESTS MAX_TOKENS]
//!
//! Under `cargo test` (no `--bench`) it is a smoke run: the tiny-qwen3 preset, 2 clients
//! × 2 requests of 2 tokens. The default run is 16 clients × 2 requests of 16 tokens.

use pocketrt::synth::{write_package, SynthSource};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A tokenizer.json for `vocab` ids: the 256 byte tokens, then two-byte tokens (no
/// merges, so text encodes to bytes; every id decodes).
fn tokenizer_json(vocab: usize) -> String {
    let ch = |b: usize| pocketrt::tokenizer::bytelevel::byte_to_char(b as u8);
    let mut map = serde_json::Map::new();
    for b in 0..256 {
        map.insert(ch(b).to_string(), b.into());
    }
    for id in 256..vocab.min(1 << 16) {
        map.insert(format!("{}{}", ch(id / 256), ch(id % 256)), id.into());
    }
    let level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
                                   "trim_offsets": false, "use_regex": true});
    serde_json::json!({"version": "1.0", "added_tokens": [], "normalizer": null,
        "pre_tokenizer": level, "post_processor": null, "decoder": level,
        "model": {"type": "BPE", "vocab": map, "merges": []}})
    .to_string()
}

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pocketrt serve MODEL --parallel N` on a free port, once it is ready.
fn start(model: &Path, parallel: usize, context: usize) -> Server {
    use std::io::BufRead;
    let child = Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .arg("serve")
        .arg(model)
        .args([
            "--backend",
            "cpu",
            "--context",
            &context.to_string(),
            "--port",
            "0",
        ])
        .args(["--parallel", &parallel.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pocketrt serve");
    let mut server = Server(child, String::new()); // killed when dropped
    let stderr = server.0.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    server.1 = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            Some(
                l.split("listening on http://")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .to_string(),
            )
        })
        .expect("a listening line");
    // The server's log goes on to stderr (stdout is the JSON).
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("{l}")));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        if let Ok((200, _)) = request(&server.1, "GET", "/health", "") {
            return server;
        }
        if let Some(status) = server.0.try_wait().unwrap() {
            panic!("the server exited: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the server did not get ready");
}

/// One HTTP/1.1 request: the status and the body as it came (with its chunk framing).
fn request(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, out))
}

/// A streamed completion: (time to the first chunk, generated tokens).
fn stream(addr: &str, prompt: &str, max_tokens: usize) -> (f64, usize) {
    let body = serde_json::json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "stream": true, "stream_options": {"include_usage": true}})
    .to_string();
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (mut all, mut buf, mut first) = (String::new(), [0u8; 4096], None);
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.push_str(&String::from_utf8_lossy(&buf[..n]));
        if first.is_none() && all.contains("data: {") {
            first = Some(t0.elapsed().as_secs_f64());
        }
    }
    let mut tokens = 0;
    for event in all.split("data: ").skip(1) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(event.lines().next().unwrap_or(""))
        else {
            continue;
        };
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            tokens = n as usize;
        }
    }
    assert!(tokens > 0, "no usage in the stream: {all}");
    (first.unwrap_or(f64::NAN), tokens)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (preset, defaults, context) = if bench {
        ("pocket-0.3b", [16, 2, 16], 1024)
    } else {
        ("tiny-qwen3", [2, 2, 2], 512)
    };
    let arg = |i: usize| *args.get(i).unwrap_or(&defaults[i]);
    let (clients, requests, max_tokens) = (arg(0), arg(1), arg(2));
    let dir = std::env::temp_dir().join(format!("pocketrt-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = pocketrt::synth::preset(preset).unwrap();
    let vocab = config.vocab_size;
    let mut src = SynthSource::new(config, 1)
        .unwrap()
        .with_tokenizer(tokenizer_json(vocab), None);
    write_package(&mut src, &dir).unwrap();
    let system = "You are a helpful assistant. Answer briefly and precisely.\n".to_string();
    let mut results = serde_json::Map::new();
    for parallel in [1, 4] {
        let server = start(&dir, parallel, context);
        let addr = server.1.clone();
        let t0 = Instant::now();
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (addr, system) = (addr.clone(), system.clone());
                std::thread::spawn(move || {
                    let mut prompt = system;
                    let mut out = vec![];
                    for r in 0..requests {
                        prompt.push_str(&format!("Client {c}, question {r}: what next?\n"));
                        let (ttft, tokens) = stream(&addr, &prompt, max_tokens);
                        out.push((ttft, tokens));
                    }
                    out
                })
            })
            .collect();
        let all: Vec<(f64, usize)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let wall = t0.elapsed().as_secs_f64();
        let (_, metrics) = request(&addr, "GET", "/metrics", "").unwrap();
        let cached = metrics
            .lines()
            .find_map(|l| l.strip_prefix("pocketrt_prompt_tokens_cached_total "))
            .unwrap_or("?")
            .to_string();
        let mut ttft: Vec<f64> = all.iter().map(|a| a.0).collect();
        ttft.sort_by(f64::total_cmp);
        let tokens: usize = all.iter().map(|a| a.1).sum();
        results.insert(
            format!("parallel_{parallel}"),
            serde_json::json!({
                "requests": all.len(),
                "generated_tokens": tokens,
                "wall_s": (wall * 100.0).round() / 100.0,
                "throughput_tok_s": (tokens as f64 / wall * 10.0).round() / 10.0,
                "ttft_p50_ms": (percentile(&ttft, 0.5) * 1e3).round(),
                "ttft_p99_ms": (percentile(&ttft, 0.99) * 1e3).round(),
                "prompt_tokens_cached": cached.trim().parse::<f64>().unwrap_or(f64::NAN),
            }),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let doc = serde_json::json!({
        "bench": "serve",
        "model": format!("{preset} synthetic"),
        "backend": "cpu",
        "clients": clients,
        "requests_per_client": requests,
        "max_tokens": max_tokens,
        "results": results,
    });
    println!("{doc}");
}
