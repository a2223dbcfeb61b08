//! The CLI on the real Qwen2.5-Coder-0.5B GGUF: `inspect` reports its shape, `convert
//! --weights keep` makes a package that `inspect` reads back as the same model. Bad input
//! → a clear error and a failing exit code, never a panic. `chat` on a tiny synthetic package survives a
//! lost GPU device.

mod real_data;

use real_data::coder_gguf;
use std::process::{Command, Output};

fn pocketrt(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .args(args)
        .output()
        .expect("run pocketrt")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "pocketrt failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn summary_lines(text: &str) -> Vec<String> {
    [
        "architecture:",
        "layers:",
        "hidden:",
        "ffn:",
        "heads:",
        "vocab:",
        "rope theta:",
    ]
    .iter()
    .map(|k| {
        text.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("no {k} line in:\n{text}"))
            .to_string()
    })
    .collect()
}

#[test]
fn real_coder_gguf_inspects_as_qwen2_and_converts_to_a_package_with_the_same_shape() {
    let gguf = coder_gguf();
    let text = stdout(&pocketrt(&["inspect".as_ref(), gguf.as_os_str()]));
    let lines = summary_lines(&text);
    assert_eq!(lines[0].split_whitespace().last(), Some("qwen2"));
    assert_eq!(lines[1].split_whitespace().last(), Some("24"));
    assert_eq!(lines[2].split_whitespace().last(), Some("896"));
    assert_eq!(lines[5].split_whitespace().last(), Some("151936"));
    assert!(
        text.contains("blk.23.ffn_down.weight"),
        "tensor table missing:\n{text}"
    );

    let out = std::env::temp_dir().join(format!("pocketrt-cli-coder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let conv = stdout(&pocketrt(&[
        "convert".as_ref(),
        "--weights".as_ref(),
        "keep".as_ref(),
        gguf.as_os_str(),
        out.as_os_str(),
    ]));
    println!("{conv}");
    // Q5_0 and Q8_0 kept, Q4_K and Q6_K quantized; no Q4 g64 matrix (oracle_real checks
    // the counts against the tensor table).
    assert!(
        conv.contains("q8 g32 groups: 16421888 kept bit-exactly, 3268608 requantized"),
        "{conv}"
    );
    assert!(!conv.contains("q4 g64 groups"), "{conv}");
    let back = stdout(&pocketrt(&[
        "inspect".as_ref(),
        "--summary".as_ref(),
        out.as_os_str(),
    ]));
    println!("{back}");
    assert_eq!(summary_lines(&back), lines);
    assert!(back.contains("pocket package"));
    // The package carries the GGUF's tokenizer: same ids, plain and through the template.
    for extra in [None, Some("--chat")] {
        let ids = |model: &std::ffi::OsStr| {
            let mut args: Vec<&std::ffi::OsStr> = vec!["tokenize".as_ref(), "--ids-only".as_ref()];
            args.extend(extra.map(std::ffi::OsStr::new));
            args.extend([model, "def fibonacci(n): 你好 🦀".as_ref()]);
            stdout(&pocketrt(&args))
        };
        let (a, b) = (ids(gguf.as_os_str()), ids(out.as_os_str()));
        assert_eq!(a, b, "tokenize {extra:?}");
        assert!(a.split_whitespace().count() >= 8, "{a}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn bad_input_gives_an_error_message_and_failure_status() {
    let dir = std::env::temp_dir().join(format!("pocketrt-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"NOTAGGUF at all").unwrap();
    let (missing, out) = (dir.join("missing"), dir.join("o"));
    let gguf = coder_gguf();
    let run = |extra: &[&'static str]| {
        let mut v: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), gguf.as_os_str(), "-p".as_ref()];
        v.push("a prompt longer than four tokens".as_ref());
        v.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
        v
    };
    for args in [
        run(&["--context", "4"]),
        run(&["--temp", "-1"]),
        run(&["--top-p", "0"]),
        vec![
            "run".as_ref(),
            junk.as_os_str(),
            "-p".as_ref(),
            "hi".as_ref(),
        ],
        vec!["chat".as_ref(), missing.as_os_str()],
        vec!["inspect".as_ref(), junk.as_os_str()],
        vec!["inspect".as_ref(), missing.as_os_str()],
        vec!["convert".as_ref(), junk.as_os_str(), out.as_os_str()],
        vec![
            "convert".as_ref(),
            junk.as_os_str(),
            out.as_os_str(),
            "--group".as_ref(),
            "32".as_ref(),
        ],
    ] {
        let o = pocketrt(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.starts_with("error: "), "{args:?}: stderr {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
    // A hub id without network: the error says how to pass a local file instead.
    let o = Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .args(["run", "some-org/some-model", "-p", "hi"])
        .env("POCKETRT_HUB_ENDPOINT", "http://127.0.0.1:1")
        .env("POCKETRT_CACHE", &dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("pass its path"),
        "{err}"
    );
}

#[test]
fn run_on_the_cpu_backend_streams_llama_cpp_s_greedy_text() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/oracle/llamacpp/reference.json").unwrap(),
    )
    .unwrap();
    let case = &reference["cases"][0];
    let (prompt, expected) = (
        case["prompt"].as_str().unwrap(),
        case["generated_text"].as_str().unwrap(),
    );
    let n = case["generated_ids"].as_array().unwrap().len().to_string();
    let gguf = coder_gguf();
    let o = pocketrt(&[
        "run".as_ref(),
        gguf.as_os_str(),
        "-p".as_ref(),
        prompt.as_ref(),
        "-n".as_ref(),
        n.as_ref(),
        "--backend".as_ref(),
        "reference".as_ref(),
        "--weights".as_ref(),
        "f32".as_ref(),
    ]);
    let text = stdout(&o);
    assert_eq!(text.strip_suffix('\n').unwrap_or(&text), expected);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("tok/s"), "no speed report: {err}");
}

/// `pocketrt chat` with its stdin piped (as a terminal or tmux would feed it): the first
/// reply equals `run --chat` on the same prompt (greedy), `/reset` works, and the second
/// turn reuses the cached system prompt.
#[test]
fn chat_answers_line_by_line_like_run_chat() {
    let gguf = coder_gguf();
    // The fast CPU backend: the chat loop is the claim, not the backend (the reference's
    // f32 weights made this the slowest CLI test).
    let common = ["-n", "10", "--temp", "0", "--backend", "cpu"];
    let question = "Write a Python one-liner that prints hello";
    let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), gguf.as_os_str()];
    args.extend(["--chat", "-p", question].map(std::ffi::OsStr::new));
    args.extend(common.map(std::ffi::OsStr::new));
    let single = stdout(&pocketrt(&args));
    let answer = single.trim_end();
    assert!(answer.contains("print"), "{answer}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .args([
            std::ffi::OsStr::new("chat"),
            gguf.as_os_str(),
            "-v".as_ref(),
        ])
        .args(common)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pocketrt chat");
    let input = format!("{question}\n/reset\n{question}\n");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let text = stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        text,
        format!("> {answer}\n> (chat cleared)\n> {answer}\n> \n"),
        "stderr: {err}"
    );
    // Per-turn stats (-v): the second turn re-uses at least the system prompt.
    let reused: Vec<usize> = err
        .lines()
        .filter_map(|l| l.split(" tokens (").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(reused.len(), 2, "{err}");
    assert!(reused[0] == 0 && reused[1] > 10, "{reused:?}");
}

/// `synth` writes a tiny model and `bench --json` measures it on the GPU: the warm-up
/// repetition is not counted (`-r` tok/s per test either way), one submit per token, and
/// the dispatches per token are the layers' plus embed, head and argmax.
#[test]
fn synth_then_bench_reports_counted_repetitions_dispatches_and_submits() {
    let dir = std::env::temp_dir().join(format!("pocketrt-cli-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let synth = ["synth", "--preset", "tiny-qwen3"].map(std::ffi::OsStr::new);
    stdout(&pocketrt(&[&synth[..], &[dir.as_os_str()]].concat()));
    for (flags, warmup) in [(&[][..], true), (&["--no-warmup"][..], false)] {
        let mut args = vec![std::ffi::OsStr::new("bench"), dir.as_os_str()];
        args.extend(["-p", "3", "-n", "4", "-r", "2", "--json"].map(std::ffi::OsStr::new));
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let report: serde_json::Value = serde_json::from_str(&stdout(&pocketrt(&args))).unwrap();
        assert_eq!(report["warmup"], warmup, "{report}");
        let tests = report["tests"].as_array().unwrap();
        let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
        assert_eq!(names, ["pp3", "tg4"]);
        for t in tests {
            let tok_s = t["tok_s"].as_array().unwrap();
            assert_eq!(tok_s.len(), 2, "{t}");
            assert!(tok_s.iter().all(|v| v.as_f64().unwrap() > 0.0), "{t}");
        }
        assert_eq!(report["submits_per_token"], 1.0, "{report}");
        let layers = pocketrt::synth::preset("tiny-qwen3").unwrap().n_layers as u64;
        let per_layer = report["dispatches_per_layer"].as_u64().unwrap();
        assert_eq!(
            report["dispatches_per_token"],
            per_layer * layers + 3,
            "{report}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tiny random Qwen3 package with a byte-level tokenizer over its vocabulary and a
/// ChatML template, in a fresh folder.
fn tiny_chat_package(name: &str) -> std::path::PathBuf {
    use pocketrt::synth::{write_package, SynthSource};
    let mut specials = vec!["<|im_start|>".to_string(), "<|im_end|>".to_string()];
    specials.extend((258..1000).map(|i| format!("<|extra_{i}|>")));
    let specials: Vec<&str> = specials.iter().map(String::as_str).collect();
    let template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n\
                    {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    let json = pocketrt::tokenizer::byte_level_json(&specials);
    let mut src = SynthSource::preset("tiny-qwen3", 5)
        .unwrap()
        .with_tokenizer(json, Some(template.to_string()));
    let dir = std::env::temp_dir().join(format!("pocketrt-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_package(&mut src, &dir).unwrap();
    dir
}

/// The reply of `pocketrt run MODEL --chat -p PROMPT ARGS...`.
fn run_chat(model: &std::path::Path, prompt: &str, args: &[&str]) -> String {
    let mut all: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), model.as_os_str()];
    all.extend(["--chat", "-p", prompt].map(std::ffi::OsStr::new));
    all.extend(args.iter().map(std::ffi::OsStr::new));
    stdout(&pocketrt(&all)).trim_end_matches('\n').to_string()
}

/// `pocketrt chat MODEL ARGS...` with `input` on its stdin and `env` set: (stdout, stderr).
fn chat_piped(
    model: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &str,
) -> (String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pocketrt"))
        .args([std::ffi::OsStr::new("chat"), model.as_os_str()])
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn pocketrt chat");
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `pocketrt chat` on the GPU whose device is lost mid-reply (the test hook
/// `POCKETRT_TEST_LOSE_GPU_AT` destroys it as a driver reset would): it says so on
/// stderr, loads the model again, and answers the turn with the undisturbed reply; the
/// next turn goes on in the reloaded model.
#[test]
fn chat_on_the_gpu_recovers_from_a_lost_device_and_answers_again() {
    let model = tiny_chat_package("gpu-lost");
    let common = ["-n", "12", "--temp", "0", "--backend", "gpu"];
    let answer = run_chat(&model, "hello", &common);
    assert!(!answer.is_empty(), "the model answers something");
    let lose = [("POCKETRT_TEST_LOSE_GPU_AT", "4")];
    let (text, err) = chat_piped(&model, &common, &lose, "hello\n/reset\nhello\n");
    assert!(err.contains("the GPU device was lost"), "{err}");
    assert!(err.contains("reloaded in"), "{err}");
    // "> " + the reply cut short, then the whole reply; after /reset the same again.
    let want_end = format!("\n{answer}\n> (chat cleared)\n> {answer}\n> \n");
    assert!(text.ends_with(&want_end), "stdout: {text:?}\nstderr: {err}");
    let _ = std::fs::remove_dir_all(&model);
}

/// `pocketrt chat` longer than its context: each turn that no longer fits drops the
/// oldest turn (said on stderr) and goes on; here every turn then shows the model
/// exactly the first turn's prompt, so every reply is the first one.
#[test]
fn chat_longer_than_its_context_drops_the_oldest_turns_and_goes_on() {
    let model = tiny_chat_package("truncate");
    let common = [
        "-n",
        "8",
        "--temp",
        "0",
        "--backend",
        "cpu",
        "--context",
        "48",
    ];
    let answer = run_chat(&model, "hello", &common);
    let (text, err) = chat_piped(&model, &common, &[], &"hello\n".repeat(4));
    assert_eq!(
        text,
        format!("> {answer}\n").repeat(4) + "> \n",
        "stderr: {err}"
    );
    let dropped = err
        .matches("2 oldest messages no longer fit the context of 48")
        .count();
    assert_eq!(dropped, 3, "{err}");
    let _ = std::fs::remove_dir_all(&model);
}

/// `pocketrt run MODEL ARGS...`: (stdout without its last newline, stderr), asserting
/// success.
fn run_args(model: &std::path::Path, args: &[&str]) -> (String, String) {
    let mut all: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), model.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    let o = pocketrt(&all);
    let text = stdout(&o);
    let text = text.strip_suffix('\n').unwrap_or(&text).to_string();
    (text, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The number after `key` in the line of `text` that has it (`prompt 9 tokens (8 reused`
/// → key `tokens (`: 8).
fn figure(text: &str, key: &str) -> usize {
    let after = text
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{key:?}: {text}"))
}

/// `run --session F` twice: the second run restores what the first saved (its prompt
/// and reply), its `-v` prompt line counts those tokens as reused, and its text goes on
/// exactly as one uninterrupted run's does. A file that is not a snapshot, or a
/// truncated one, is a clear error; one whose rows fail their checksum is prefilled
/// from its tokens, and says so.
#[test]
fn run_with_a_session_file_restores_it_and_continues_like_one_run() {
    let model = tiny_chat_package("session");
    let file = model.join("run.session");
    let f = file.to_str().unwrap();
    let prompt = "Once upon a time";
    // Letters only (a memoryless constraint: every step allows the same tokens), so that
    // the text of the reply is its tokens again in the next prompt.
    let common = ["--backend", "cpu", "--temp", "0", "--regex", "[a-z ]*"];
    let with = |p: &str, extra: &[&str]| {
        let mut args = vec!["-p", p];
        args.extend(common);
        args.extend(extra);
        run_args(&model, &args)
    };
    let (first, err1) = with(prompt, &["-n", "12", "--session", f, "-v"]);
    assert!(err1.contains("new (saved when done)"), "{err1}");
    let saved = figure(&err1, ": saved ");
    assert_eq!(saved, figure(&err1, "prompt ") + 11, "{err1}");
    assert!(figure(&err1, "positions, ") > 0, "bytes written: {err1}");
    let (second, err2) = with(
        &format!("{prompt}{first}"),
        &["-n", "12", "--session", f, "-v"],
    );
    assert_eq!(figure(&err2, "restored "), saved, "{err2}");
    assert_eq!(figure(&err2, "tokens ("), saved, "reused: {err2}");
    assert!(err2.contains(" ms"), "{err2}");
    let (whole, _) = with(prompt, &["-n", "24"]);
    println!("{first:?} + {second:?}\n{err2}");
    assert_eq!(format!("{first}{second}"), whole, "{err2}");

    // Damaged files: junk and a snapshot cut inside its header are errors; the last save
    // cut short (the file's last 100 bytes lost) restores the saves before it and says
    // so; flipped rows are prefilled.
    let bytes = std::fs::read(&file).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "junk",
            b"not a snapshot at all".to_vec(),
            "not a pocketrt session snapshot",
        ),
        ("cut", bytes[..60].to_vec(), "corrupt: truncated"),
        (
            "torn",
            bytes[..bytes.len() - 100].to_vec(),
            "its last save was cut short",
        ),
        (
            "flip",
            {
                let mut b = bytes.clone();
                let at = b.len() / 2;
                b[at] ^= 0xff;
                b
            },
            "prefilled its",
        ),
    ];
    for (name, data, said) in cases {
        let path = model.join(format!("{name}.session"));
        std::fs::write(&path, data).unwrap();
        let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), model.as_os_str()];
        args.extend(["-p", prompt, "--session"].map(std::ffi::OsStr::new));
        args.push(path.as_os_str());
        args.extend(common.map(std::ffi::OsStr::new));
        args.extend(["-n", "4"].map(std::ffi::OsStr::new));
        let o = pocketrt(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(said), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        let usable = name == "flip" || name == "torn";
        assert_eq!(o.status.success(), usable, "{name}: {err}");
        if !usable {
            assert!(err.starts_with("error: session snapshot"), "{name}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&model);
}

/// `chat --session F` saves after every reply: a chat stopped after its first turn and
/// started again restores the chat and its cache, and its second turn is the one a chat
/// that never stopped gives, reusing as many tokens.
#[test]
fn chat_with_a_session_file_goes_on_after_a_restart_like_one_chat() {
    let model = tiny_chat_package("chat-session");
    let file = model.join("chat.session");
    let common = ["-n", "8", "--temp", "0", "--backend", "cpu", "-v"];
    let (one, err_one) = chat_piped(&model, &common, &[], "hello\nhow are you\n");
    let mut args = common.to_vec();
    args.extend(["--session", file.to_str().unwrap()]);
    let (a, _) = chat_piped(&model, &args, &[], "hello\n");
    let (b, err_b) = chat_piped(&model, &args, &[], "how are you\n");
    assert!(err_b.contains("2 messages restored"), "{err_b}");
    let first = a.strip_suffix("> \n").unwrap();
    assert_eq!(format!("{first}{b}"), one, "{err_b}");
    let reused = |err: &str| -> Vec<usize> {
        err.lines()
            .filter(|l| l.starts_with("prompt "))
            .map(|l| figure(l, "tokens ("))
            .collect()
    };
    assert_eq!(reused(&err_b), reused(&err_one)[1..], "{err_one}\n{err_b}");
    assert!(reused(&err_b)[0] > 10, "{err_b}");
    let _ = std::fs::remove_dir_all(&model);
}

/// The user message of the first code-edit prompt of the speculative-decoding fixtures.
fn code_edit_prompt() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/speculative/prompts.json"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let prompts = doc["prompts"].as_array().unwrap();
    let edit = prompts.iter().find(|p| p["workload"] == "code_edit");
    edit.unwrap()["text"].as_str().unwrap().to_string()
}

/// `run --spec lookup` on the real coder GGUF (CPU backend, greedy) prints the text
/// `run` prints without it, and with `-v` its drafts, most of them accepted where the
/// reply repeats the prompt's code. `--spec` with a model of another vocabulary (the
/// tiny package's 1,000 tokens) and a `--draft-max` out of range are clear errors.
#[test]
fn run_with_spec_lookup_prints_the_same_text_and_its_drafts() {
    let gguf = coder_gguf();
    let prompt = code_edit_prompt();
    let common = [
        "--chat",
        "-p",
        &prompt,
        "-n",
        "48",
        "--backend",
        "cpu",
        "-v",
    ];
    let (plain, plain_err) = run_args(&gguf, &common);
    let spec = [&common[..], &["--spec", "lookup", "--draft-max", "6"]].concat();
    let (text, err) = run_args(&gguf, &spec);
    assert_eq!(text, plain, "stderr: {err}");
    assert!(text.contains("def parse_config"), "{text}");
    assert!(!plain_err.contains("speculative:"), "{plain_err}");
    let (drafted, accepted, steps) = (
        figure(&err, "speculative: "),
        figure(&err, " drafted, "),
        figure(&err, " accepted in "),
    );
    println!("{}", err.lines().last().unwrap_or(""));
    assert!(
        accepted > steps && drafted >= accepted && drafted <= 6 * steps,
        "{err}"
    );
    assert!(err.contains("accepted/step)"), "{err}");

    let tiny = tiny_chat_package("spec-vocab");
    let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), gguf.as_os_str()];
    args.extend(["-p", "x", "-n", "2", "--backend", "cpu", "--spec"].map(std::ffi::OsStr::new));
    args.push(tiny.as_os_str());
    let o = pocketrt(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("--spec ")
            && err.contains("vocabulary has 1000 tokens, the model's 151936")
            && err.contains("must share the model's tokenizer"),
        "{err}"
    );
    for n in ["0", "33"] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref(), tiny.as_os_str()];
        args.extend(["-p", "x", "--spec", "lookup", "--draft-max", n].map(std::ffi::OsStr::new));
        let o = pocketrt(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("--draft-max"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&tiny);
}

/// `chat --spec lookup` answers each turn as `run --chat` does without it (the tiny
/// package, greedy), and `-v` gives each turn's drafts line.
#[test]
fn chat_with_spec_lookup_answers_like_run_without_it() {
    let model = tiny_chat_package("spec-chat");
    let common = ["-n", "24", "--temp", "0", "--backend", "cpu"];
    let answer = run_chat(&model, "hello hello hello", &common);
    let spec = [&common[..], &["--spec", "lookup", "-v"]].concat();
    let input = "hello hello hello\n/reset\nhello hello hello\n";
    let (text, err) = chat_piped(&model, &spec, &[], input);
    assert_eq!(
        text,
        format!("> {answer}\n> (chat cleared)\n> {answer}\n> \n"),
        "stderr: {err}"
    );
    assert_eq!(err.matches("speculative: ").count(), 2, "{err}");
    let _ = std::fs::remove_dir_all(&model);
}
