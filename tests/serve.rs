//! `pocketrt serve` against clients we did not write: the official `openai` Python package
//! (tests/requirements.txt) and npm `openai` (web/package.json), on the tiny Qwen3-shaped
//! fixture model (the API fixtures' shape, tokenizer and real Qwen3 template) and on the
//! real Qwen2.5-Coder GGUF. The client scripts are tests/serve/clients.{py,mjs}. Also:
//! CORS preflight, the log lines, `--parallel` that does not fit, Ctrl-C, and the slot
//! API and prefix cache across a restart.

#[path = "api_common/mod.rs"]
mod api_common;
mod real_data;

use pocketrt::convert::{convert, ConvertOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-key";

/// The tiny fixture model as a package with its tokenizer and chat template (once).
fn tiny_package() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pocketrt-serve-tiny-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut src = api_common::weights(api_common::config(), 1.0)
            .unwrap()
            .with_tokenizer(
                api_common::tokenizer_json(),
                Some(api_common::TEMPLATE.into()),
            );
        convert(&mut src, &dir, &ConvertOptions::default(), &mut |_| {}).unwrap();
        dir
    })
}

/// A running `pocketrt serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Start `pocketrt serve MODEL ARGS --port 0` and wait for it to listen (not to load).
    fn start(model: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pocketrt"))
            .arg("serve")
            .arg(model)
            .args(["--port", "0"])
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start pocketrt serve");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let keep = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(addr) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(addr.split_whitespace().next().unwrap_or("").to_string());
                }
                keep.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no listening line: {:?}", log.lock().unwrap()));
        Server {
            child,
            base: format!("http://{addr}"),
            log,
        }
    }

    fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// One raw HTTP/1.1 request; the whole response (head and body) as text.
    fn raw(&self, request: &str) -> String {
        let mut s = TcpStream::connect(self.addr()).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn get(&self, path: &str) -> String {
        self.raw(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nConnection: close\r\n\r\n"
        ))
    }

    /// Wait for `/health` to say 200; returns the statuses seen on the way.
    fn wait_ready(&mut self) -> Vec<u16> {
        let t0 = Instant::now();
        let mut seen = vec![];
        while t0.elapsed() < Duration::from_secs(120) {
            let head = self.get("/health");
            let status: u16 = head
                .split_whitespace()
                .nth(1)
                .unwrap_or("0")
                .parse()
                .unwrap();
            seen.push(status);
            if status == 200 {
                return seen;
            }
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "server died: {:?}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("not ready: {:?}", self.log());
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Run a client script; panics with its output when it fails. Returns its stdout.
    fn client(&self, program: &str, script: &str, args: &[&str]) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(program)
            .arg(root.join(script))
            .arg(&self.base)
            .arg(KEY)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{script} failed ({}):\n{stdout}\n{}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log().join("\n")
        );
        println!("{stdout}");
        stdout
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server on `model` on the CPU backend, context 1,024, the test key, named `alias`,
/// plus `args` (not waited for).
fn cpu_server(model: &Path, alias: &str, args: &[&str]) -> Server {
    let mut base = vec![
        "--backend",
        "cpu",
        "--context",
        "1024",
        "--api-key",
        KEY,
        "--alias",
        alias,
    ];
    base.extend_from_slice(args);
    Server::start(model, &base)
}

fn tiny_server(args: &[&str]) -> Server {
    let mut s = cpu_server(tiny_package(), "tiny", args);
    s.wait_ready();
    s
}

#[test]
fn serve_answers_the_official_python_and_node_clients() {
    let s = tiny_server(&["--cors", "http://app.example"]);
    s.client("python3", "tests/serve/clients.py", &["fixture"]);
    s.client("python3", "tests/serve/clients.py", &["speculative"]);
    s.client("node", "tests/serve/clients.mjs", &[]);

    // CORS: the allowed origin's preflight is answered (without the key), others are not.
    let preflight = |origin: &str| {
        s.raw(&format!(
            "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\n\
             Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\n\
             Connection: close\r\n\r\n"
        ))
        .to_ascii_lowercase()
    };
    let ok = preflight("http://app.example");
    assert!(ok.starts_with("http/1.1 200"), "{ok}");
    assert!(
        ok.contains("access-control-allow-origin: http://app.example"),
        "{ok}"
    );
    assert!(ok.contains("authorization"), "{ok}");
    let other = preflight("http://evil.example");
    assert!(!other.contains("access-control-allow-origin"), "{other}");

    // One log line per request, with its status (generations with their tokens).
    let log = s.log().join("\n");
    assert!(log.contains("POST /v1/chat/completions 200"), "{log}");
    assert!(log.contains("GET /v1/models 401"), "{log}");
    assert!(log.contains("POST /v1/chat/completions 413"), "{log}");
    assert!(log.contains("generated 24"), "{log}");

    // Metrics in Prometheus' text format.
    let m = s.get("/metrics");
    assert!(
        m.contains("pocketrt_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"),
        "{m}"
    );
    assert!(m.contains("pocketrt_kv_slots 1"), "{m}");
}

/// `POST /v1/embeddings` through the official clients (Python's default base64 and
/// floats, token ids, `dimensions`, errors in OpenAI's shape; npm's likewise): the vectors
/// equal the native `Session::embed`'s on the same package and backend, and a chat after
/// them answers as before them.
#[test]
fn serve_embeddings_equal_the_native_ones_through_the_official_clients() {
    use pocketrt::embed::EmbedOptions;
    use pocketrt::{cpu::WeightMode, engine, generate::Session, tokenizer::Tokenizer};
    let s = tiny_server(&[]);
    let src = &mut *pocketrt::format::open(tiny_package()).unwrap();
    let tokenizer = Tokenizer::from_hf_json(&src.tokenizer_json().unwrap().unwrap()).unwrap();
    let e = engine::Engine::load(src, engine::Backend::Cpu, WeightMode::Q4, 1024).unwrap();
    let mut native = Session::new(e, tokenizer, None);
    let texts = ["Once upon a time", "The weather in Paris", "x"];
    let opts = EmbedOptions::default();
    let short = EmbedOptions {
        dimensions: Some(16),
        ..opts
    };
    let embed = |s: &mut Session, text: &str, o: &EmbedOptions| s.embed(text, o).unwrap();
    let all: Vec<_> = texts.iter().map(|t| embed(&mut native, t, &opts)).collect();
    let doc = serde_json::json!({
        "texts": texts,
        "vectors": all.iter().map(|e| &e.vector).collect::<Vec<_>>(),
        "tokens": all.iter().map(|e| e.tokens).collect::<Vec<_>>(),
        "dims16": [embed(&mut native, texts[0], &short).vector],
        "ids0": native.tokenizer().encode(texts[0], true),
    });
    let path = std::env::temp_dir().join(format!("pocketrt-embed-{}.json", std::process::id()));
    std::fs::write(&path, doc.to_string()).unwrap();
    let path = path.to_str().unwrap();
    s.client("python3", "tests/serve/clients.py", &["embeddings", path]);
    s.client("node", "tests/serve/embeddings.mjs", &[path]);
    let log = s.log().join("\n");
    assert!(log.contains("POST /v1/embeddings 200"), "{log}");
    assert!(log.contains("POST /v1/embeddings 400"), "{log}");
    let _ = std::fs::remove_file(path);
}

/// Concurrent clients in their slots, with speculative decoding on by default (`--spec
/// lookup`): each gets the text it gets alone; a request that does not say drafts, one
/// with `"speculative": false` does not (the same text); the log says the drafts.
#[test]
fn serve_parallel_slots_give_concurrent_clients_their_alone_text() {
    let s = tiny_server(&["--parallel", "4", "--spec", "lookup", "--draft-max", "4"]);
    s.client("python3", "tests/serve/clients.py", &["parallel"]);
    s.client("python3", "tests/serve/clients.py", &["spec_default"]);
    let m = s.get("/metrics");
    assert!(m.contains("pocketrt_kv_slots 4"), "{m}");
    let log = s.log().join("\n");
    assert!(log.contains(" accepted in "), "{log}");
}

#[test]
fn serve_refuses_a_parallel_that_does_not_fit_the_memory() {
    let mut s = Server::start(
        tiny_package(),
        &[
            "--backend",
            "cpu",
            "--context",
            "512",
            "--parallel",
            "100000000",
        ],
    );
    let status = s.child.wait().unwrap();
    let log = s.log().join("\n");
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("--parallel 100000000 needs") && log.contains("MiB"),
        "{log}"
    );

    // The GPU model binds its one cache: more slots are refused with the reason.
    let mut s = Server::start(
        tiny_package(),
        &["--backend", "gpu", "--context", "512", "--parallel", "2"],
    );
    let status = s.child.wait().unwrap();
    let log = s.log().join("\n");
    assert!(!status.success(), "{log}");
    assert!(log.contains("the GPU backend keeps one KV cache"), "{log}");
}

#[test]
fn serve_answers_504_past_the_request_timeout() {
    let s = tiny_server(&["--timeout", "0.000001"]);
    let body = r#"{"prompt": "Once", "max_tokens": 5}"#;
    let out = s.raw(&format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    assert!(out.starts_with("HTTP/1.1 504"), "{out}");
    assert!(
        out.contains(r#""code":"timeout""#) && out.contains("timeout of 0.000001 s"),
        "{out}"
    );
}

#[test]
fn serve_stops_cleanly_on_ctrl_c_ending_an_inflight_stream() {
    let mut s = tiny_server(&[]);
    let mut stream = TcpStream::connect(s.addr()).unwrap();
    let body = r#"{"prompt": "Once", "max_tokens": 500, "temperature": 0, "stream": true}"#;
    write!(
        stream,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 64];
    let n = stream.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let kill = Command::new("kill")
        .args(["-INT", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = String::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = stream.read_to_string(&mut rest);
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no exit: {:?}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{:?}", s.log());
    assert!(
        rest.contains("data: [DONE]"),
        "the stream was not ended: {rest}"
    );
    assert!(s.log().join("\n").contains("stopped"), "{:?}", s.log());
}

/// The slot API and the prefix cache across a restart (tests/serve/clients.py's
/// `slots_save` on one server, `slots_restore` on the next, the same folders): a
/// conversation's slot is saved; after the restart it is restored into a free slot and
/// the next turn reuses all of it (`cached_tokens` and the reply as on the first
/// server); the slot API's errors; the first request with a long system prompt on the
/// restarted server starts from the prefix cache.
#[test]
fn serve_slots_and_the_prefix_cache_survive_a_restart() {
    let root = std::env::temp_dir().join(format!("pocketrt-serve-slots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (slots, prefixes) = (root.join("slots"), root.join("prefixes"));
    let args = [
        "--parallel",
        "2",
        "--slot-save-path",
        slots.to_str().unwrap(),
        "--prefix-cache",
        prefixes.to_str().unwrap(),
        "-v",
    ];
    for mode in ["slots_save", "slots_restore"] {
        let s = tiny_server(&args);
        s.client(
            "python3",
            "tests/serve/clients.py",
            &[mode, slots.to_str().unwrap()],
        );
        let log = s.log().join("\n");
        assert!(log.contains("/slots/"), "{log}");
        println!(
            "{}",
            log.lines()
                .filter(|l| l.contains("slot") || l.contains("prefix"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn serve_real_coder_gguf_on_the_cpu_backend() {
    let gguf = real_data::coder_gguf();
    let mut s = cpu_server(&gguf, "coder", &[]);
    let seen = s.wait_ready();
    assert_eq!(seen.first(), Some(&503), "health while loading: {seen:?}");
    s.client("python3", "tests/serve/clients.py", &["coder"]);
}
