//! The hub client against a local server that imitates the hub's API and file layout.

use super::choose::{choose, Choice, Sibling};
use super::*;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// Requests seen: (path, Range header).
type Log = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Serve `files` (path → body) over HTTP/1.1 on 127.0.0.1, honouring `Range: bytes=N-`.
fn serve(files: HashMap<String, Vec<u8>>) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split(' ').nth(1).unwrap_or("").to_string();
            let mut range = None;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    range = Some(v.trim().trim_end_matches('-').to_string());
                }
            }
            seen.lock().unwrap().push((path.clone(), range.clone()));
            let (status, body) = match files.get(&path) {
                None => ("404 Not Found", &b"not found"[..]),
                Some(b) => match range.as_deref().and_then(|r| r.parse::<usize>().ok()) {
                    Some(from) if from <= b.len() => ("206 Partial Content", &b[from..]),
                    _ => ("200 OK", &b[..]),
                },
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body);
        }
    });
    (endpoint, log)
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn listing(files: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
    let siblings: Vec<serde_json::Value> = files
        .iter()
        .map(|(name, lfs)| match lfs {
            Some(b) => serde_json::json!({"rfilename": name, "size": b.len(),
                                          "lfs": {"sha256": sha(b), "size": b.len()}}),
            None => serde_json::json!({"rfilename": name}),
        })
        .collect();
    serde_json::json!({"id": "x", "siblings": siblings})
        .to_string()
        .into_bytes()
}

fn temp_cache(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pocketrt-hub-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn sib(name: &str, size: Option<u64>) -> Sibling {
    Sibling {
        name: name.into(),
        size,
        sha256: None,
    }
}

#[test]
fn hub_ids_are_owner_slash_name_and_nothing_else() {
    assert!(is_hub_id("taobao-mnn/MNN-Pocket-0.3B-GGUF"));
    for bad in [
        "model.gguf",
        "./a/b",
        "/abs/path",
        "a/b/c",
        "a/",
        "../x",
        "a/.hidden",
        "a b/c",
    ] {
        assert!(!is_hub_id(bad), "{bad}");
    }
}

#[test]
fn the_choice_prefers_a_package_then_the_lossless_gguf_then_an_hf_folder() {
    let pkg = [
        sib("manifest.json", None),
        sib("tokenizer.json", None),
        sib("m-q4_1.gguf", None),
    ];
    assert!(matches!(
        choose(&pkg),
        Some(Choice::Package { tokenizer: Some(_) })
    ));
    let ggufs = [
        sib("README.md", None),
        sib("Model-Q8_0.gguf", Some(9)),
        sib("Model-Q4_K_M.gguf", Some(5)),
        sib("Model-Q4_1.gguf", Some(6)),
        sib("mmproj-Q4_1.gguf", Some(1)),
    ];
    assert_eq!(choose(&ggufs), Some(Choice::File(ggufs[3].clone())));
    let hf = [
        sib("config.json", None),
        sib("model.safetensors", None),
        sib("tokenizer.json", None),
        sib("README.md", None),
    ];
    match choose(&hf) {
        Some(Choice::Folder(f)) => assert_eq!(f.len(), 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(choose(&[sib("README.md", None)]), None);
    // Paths outside the repository root never become file names.
    let parsed = Sibling::parse_listing(
        r#"{"siblings":[{"rfilename":"../evil.gguf"},{"rfilename":"sub/x.gguf"},{"rfilename":"ok.gguf"}]}"#,
        "a/b",
    )
    .unwrap();
    assert_eq!(parsed, vec![sib("ok.gguf", None)]);
}

#[test]
fn a_gguf_is_downloaded_once_verified_and_then_served_from_the_cache() {
    let model: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let files = HashMap::from([
        (
            "/api/models/org/tiny?blobs=true".to_string(),
            listing(&[
                ("README.md", None),
                ("tiny-Q8_0.gguf", None),
                ("tiny-Q4_1.gguf", Some(&model)),
            ]),
        ),
        (
            "/org/tiny/resolve/main/tiny-Q4_1.gguf".to_string(),
            model.clone(),
        ),
    ]);
    let (endpoint, log) = serve(files);
    let hub = Hub::new(&endpoint, temp_cache("gguf"));
    let mut last = None;
    let path = hub
        .resolve("org/tiny", &mut |p| last = Some((p.done, p.total)))
        .unwrap();
    assert!(path.ends_with("tiny-Q4_1.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), model);
    assert_eq!(last, Some((model.len() as u64, Some(model.len() as u64))));
    assert_eq!(log.lock().unwrap().len(), 2);
    // Second time: no request at all.
    assert_eq!(hub.resolve("org/tiny", &mut |_| {}).unwrap(), path);
    assert_eq!(log.lock().unwrap().len(), 2);

    // An interrupted download resumes from its .part file with a range request.
    let hub = Hub::new(&endpoint, temp_cache("resume"));
    let dir = hub.model_dir("org/tiny");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tiny-Q4_1.gguf.part"), &model[..100_000]).unwrap();
    let path = hub.resolve("org/tiny", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), model);
    let requests = log.lock().unwrap().clone();
    assert_eq!(requests.last().unwrap().1.as_deref(), Some("100000"));
}

#[test]
fn a_download_failing_its_hash_is_an_error_and_is_not_kept() {
    let model = vec![1u8; 5000];
    let mut corrupt = model.clone();
    corrupt[4000] = 2;
    let files = HashMap::from([
        (
            "/api/models/org/bad?blobs=true".to_string(),
            listing(&[("bad-Q4_1.gguf", Some(&model))]),
        ),
        ("/org/bad/resolve/main/bad-Q4_1.gguf".to_string(), corrupt),
    ]);
    let (endpoint, _) = serve(files);
    let hub = Hub::new(&endpoint, temp_cache("bad"));
    match hub.resolve("org/bad", &mut |_| {}) {
        Err(Error::Hub(m)) => assert!(m.contains("sha256"), "{m}"),
        other => panic!("{other:?}"),
    }
    let dir = hub.model_dir("org/bad");
    assert!(!dir.join("bad-Q4_1.gguf").exists() && !dir.join("bad-Q4_1.gguf.part").exists());
}

#[test]
fn a_pocket_package_downloads_its_manifest_and_every_shard() {
    use crate::convert::{convert, ConvertOptions};
    use crate::cpu::MemorySource;
    let mut config = crate::ModelConfig::from_hf_json(
        r#"{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"num_hidden_layers":2,
            "num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,
            "intermediate_size":128,"vocab_size":300,"max_position_embeddings":256,
            "rms_norm_eps":1e-6,"rope_theta":1e6,"tie_word_embeddings":true}"#,
    )
    .unwrap();
    config.eos_token_ids = vec![1];
    let mut src = MemorySource::random(config.clone(), 3, 0.5).unwrap();
    let local = temp_cache("pkg-src");
    let opts = ConvertOptions {
        shard_bytes: Some(8 << 10),
        ..Default::default()
    };
    convert(&mut src, &local, &opts, &mut |_| {}).unwrap();
    let mut files = HashMap::new();
    let mut names = vec![];
    for e in std::fs::read_dir(&local).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let body = std::fs::read(local.join(&name)).unwrap();
        files.insert(format!("/org/pkg/resolve/main/{name}"), body);
        names.push(name);
    }
    assert!(names.len() >= 3, "several shards expected: {names:?}");
    let entries: Vec<(&str, Option<&[u8]>)> = names.iter().map(|n| (n.as_str(), None)).collect();
    files.insert("/api/models/org/pkg?blobs=true".into(), listing(&entries));
    let (endpoint, log) = serve(files);
    let hub = Hub::new(&endpoint, temp_cache("pkg"));
    let dir = hub.resolve("org/pkg", &mut |_| {}).unwrap();
    assert_eq!(log.lock().unwrap().len(), 1 + names.len());
    let opened = crate::format::open(&dir).unwrap();
    assert_eq!(opened.config(), &config);
}

#[test]
fn no_network_and_unknown_models_are_clear_errors() {
    // Nothing listens on port 1.
    let hub = Hub::new("http://127.0.0.1:1", temp_cache("offline"));
    match hub.resolve("org/any", &mut |_| {}) {
        Err(Error::Hub(m)) => assert!(m.contains("pass its path"), "{m}"),
        other => panic!("{other:?}"),
    }
    let (endpoint, _) = serve(HashMap::new());
    let hub = Hub::new(&endpoint, temp_cache("404"));
    match hub.resolve("org/missing", &mut |_| {}) {
        Err(Error::Hub(m)) => assert!(m.contains("not found"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A local path that does not exist and is no hub id.
    assert!(matches!(
        resolve_model("no/such/model.gguf", &mut |_| {}),
        Err(Error::Io { .. })
    ));
}
