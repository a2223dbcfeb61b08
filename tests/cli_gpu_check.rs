//! `pocketrt gpu-check` on a small model (fast enough for every test run): the oracle
//! check passes and the JSON document has the adapter, the profile, positive tok/s and
//! each kernel's bandwidth; `POCKETRT_PROFILE` forces the profile it reports;
//! `scripts/gpu-check` runs the binary `POCKETRT_BIN` names; `pocketrt adapters` prints
//! each adapter's profile.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_pocketrt");

/// `pocketrt gpu-check` on tiny-qwen3 (a long position of 64, a prefill of 32; each
/// profiled dispatch twice in a row).
fn gpu_check(profile: Option<&str>, extra: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["gpu-check", "--preset", "tiny-qwen3", "--long-pos", "64"])
        .args(["--prefill", "32", "--steps", "8", "--tune-ms", "500"])
        .args(["--in-a-row", "2"])
        .args(extra);
    match profile {
        Some(p) => cmd.env("POCKETRT_PROFILE", p),
        None => cmd.env_remove("POCKETRT_PROFILE"),
    };
    cmd.output().expect("run pocketrt gpu-check")
}

fn report(o: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "gpu-check failed:\n{stderr}");
    assert!(
        stderr.contains("profile "),
        "no profile line on stderr:\n{stderr}"
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

fn positive(v: &serde_json::Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {v}"));
    assert!(x > 0.0 && x.is_finite(), "{what}: {x}");
    x
}

fn check_report(r: &serde_json::Value) {
    assert!(!r["adapter"]["name"].as_str().unwrap().is_empty());
    assert_eq!(r["model"]["preset"], "tiny-qwen3");
    for mode in ["greedy", "sampled"] {
        positive(&r["pipelined"][mode]["tok_s"], mode);
    }
    assert_eq!(r["model"]["context"], 65);
    let o = &r["oracle"];
    assert_eq!(o["passed"], true);
    assert_eq!(o["tokens"], 4);
    assert_eq!(o["greedy"].as_array().unwrap().len(), 4);
    assert!(o["max_abs_err"].as_f64().unwrap() <= positive(&o["tolerance"], "tolerance"));
    let decode = r["decode"].as_array().unwrap();
    let positions: Vec<u64> = decode
        .iter()
        .map(|d| d["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [0, 64]);
    for d in decode {
        positive(&d["tok_s"], "decode tok/s");
        assert!(d["dispatches"].as_u64().unwrap() > 0);
        assert_eq!(d["submits_per_token"], 1.0, "one submit per decode step");
    }
    assert_eq!(r["submits_per_token"], 1.0);
    // Decode with W_o folded and not, at both positions (tiny-qwen3's heads fold in every
    // profile): the folded step one dispatch per layer fewer.
    let fold = &r["fold_output"];
    let at = |f: &str| -> Vec<u64> {
        let entries = fold[f]
            .as_array()
            .unwrap_or_else(|| panic!("fold {f}: {fold}"));
        let positions: Vec<u64> = entries
            .iter()
            .map(|d| d["position"].as_u64().unwrap())
            .collect();
        assert_eq!(positions, [0, 64], "fold {f}");
        for d in entries {
            positive(&d["tok_s"], "decode tok/s");
        }
        entries
            .iter()
            .map(|d| d["dispatches"].as_u64().unwrap())
            .collect()
    };
    let (on, off) = (at("on"), at("off"));
    let layers = r["model"]["layers"].as_u64().unwrap();
    assert_eq!(on[0] + layers, off[0], "fold on {on:?}, off {off:?}");
    let folded = r["profile"]["fold_output"] == true;
    let default = if folded { &fold["on"] } else { &fold["off"] };
    assert_eq!(
        default, &r["decode"],
        "the profile's own step is the decode entry"
    );
    assert_eq!(r["prefill"]["tokens"], 32);
    positive(&r["prefill"]["tok_s"], "prefill tok/s");
    // Speculative decoding's verification step at 1, 2, 4 and 8 positions.
    positive(&r["verify"]["decode_step_ms"], "decode step ms");
    let ks: Vec<u64> = (r["verify"]["steps"].as_array().unwrap().iter())
        .map(|s| {
            positive(&s["ms_per_step"], "verification ms");
            s["positions"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(ks, [1, 2, 4, 8]);
    let ceiling = positive(&r["read_ceiling"]["gb_s"], "read ceiling");
    // The prefill GEMMs: each of the four shapes in the profile's design (and the f32
    // tiles beside f16 ones), at the prefill's 32 tokens.
    let gemm = r["gemm"].as_array().unwrap();
    let designs = 1 + usize::from(
        r["profile"]["gemm_tiles"]
            .as_str()
            .is_some_and(|t| t.ends_with("f16")),
    );
    assert_eq!(gemm.len(), 4 * designs, "{gemm:?}");
    for g in gemm {
        assert_eq!(g["tokens"], 32);
        positive(&g["gflop_s"], "GEMM GFLOP/s");
    }
    // The GPU GEMVs in f32 and f16 x, where the profile runs them and shader-f16 exists.
    let gpu_rows = r["profile"]["gemv"]["qkv"] == "gpu_rows";
    let f16 = r["adapter"]["shader_f16"] == true;
    let gemv = r["gemv_x_f16"].as_array().unwrap();
    assert_eq!(gemv.len(), if gpu_rows && f16 { 10 } else { 0 }, "{gemv:?}");
    for g in gemv {
        positive(&g["gb_s"], "GEMV GB/s");
    }
    // The tuner's sweep where the profile has free constants (the GPU profiles).
    let tune = &r["tune"];
    if gpu_rows {
        let trials = tune["sweep"]["trials"].as_array().unwrap();
        assert!(!trials.is_empty(), "{tune}");
        assert_eq!(trials[0]["stage"], "start");
        positive(&trials[0]["ms"], "the profile's own design, ms per token");
        assert!(
            tune["chosen"].as_str().unwrap().starts_with("gemv "),
            "{tune}"
        );
        positive(&tune["speedup"], "speedup");
    } else {
        assert!(
            tune["skipped"].as_str().unwrap().contains("textures"),
            "{tune}"
        );
    }
    let profiles = r["step_profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    for p in profiles {
        assert_eq!(p["in_a_row"], 2, "{p}");
        let kernels = p["kernels"].as_array().unwrap();
        let names: Vec<&str> = kernels
            .iter()
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        for want in ["embed", "qkv", "gate_up", "down", "head", "argmax"] {
            assert!(names.contains(&want), "no {want} kernel in {names:?}");
        }
        assert!(
            names.iter().any(|n| n.starts_with("attention")),
            "{names:?}"
        );
        for k in kernels {
            assert!(!k["design"].as_str().unwrap().is_empty(), "{k}");
            assert!(k["bytes_read"].as_u64().unwrap() > 0, "{k}");
            let gb_s = positive(&k["gb_s"], "kernel GB/s");
            let ratio = positive(&k["roofline_ratio"], "roofline ratio");
            assert!(
                (ratio - gb_s / ceiling).abs() <= 1e-9 * ratio.max(1.0),
                "{k}"
            );
        }
    }
}

#[test]
fn gpu_check_passes_the_oracle_and_reports_speeds_and_bandwidth() {
    let r = report(&gpu_check(None, &[]));
    check_report(&r);
    assert_eq!(r["profile"]["forced"], false);
}

#[test]
fn gpu_check_runs_the_profile_pocketrt_profile_forces() {
    let r = report(&gpu_check(Some("gpu"), &[]));
    check_report(&r);
    assert_eq!(r["profile"]["name"], "gpu");
    assert_eq!(r["profile"]["forced"], true);
    assert_eq!(r["profile"]["attention"], "group");
}

#[test]
fn gpu_check_refuses_a_context_too_short_for_its_positions() {
    let o = gpu_check(None, &["--context", "16"]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--context 16"), "{stderr}");
}

#[test]
fn adapters_prints_each_adapters_profile() {
    let o = Command::new(BIN).arg("adapters").output().unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("profile "), "no profile line:\n{out}");
}

#[test]
fn the_gpu_check_script_runs_the_binary_pocketrt_bin_names() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check");
    let o = Command::new(&script)
        .arg("--help")
        .env("POCKETRT_BIN", BIN)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("--long-pos"), "not gpu-check's help:\n{out}");

    let o = Command::new(&script)
        .env("POCKETRT_BIN", "/nonexistent/pocketrt")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("POCKETRT_BIN"), "{stderr}");
}

/// `pocketrt ARGS` with `env` set (and `POCKETRT_PROFILE` unset unless `env` sets it).
fn pocketrt(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("POCKETRT_PROFILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn pocketrt_tune_keeps_its_choice_and_the_next_load_applies_it() {
    let dir = std::env::temp_dir().join(format!("pocketrt-tune-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (model, cache) = (dir.join("model"), dir.join("cache"));
    let path = model.to_str().unwrap();
    let o = pocketrt(&["synth", "--preset", "tiny-qwen3", path], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The detected lavapipe profile has nothing to tune: the error says how to force one.
    let o = pocketrt(&["tune", path], &[("POCKETRT_CACHE_DIR", &cache)]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("POCKETRT_PROFILE=gpu"),
        "{stderr}"
    );

    let gpu = Path::new("gpu");
    let env = [
        ("POCKETRT_CACHE_DIR", cache.as_path()),
        ("POCKETRT_PROFILE", gpu),
    ];
    let o = pocketrt(&["tune", path, "--budget-ms", "300", "--json"], &env);
    let r = report(&o);
    let trials = r["sweep"]["trials"].as_array().unwrap();
    assert_eq!(trials[0]["stage"], "start");
    positive(&trials[0]["ms"], "ms per token");
    assert!(cache.join("gpu-tune.json").is_file());

    // A load in that profile on this adapter applies the kept design, without a sweep.
    let on = Path::new("on");
    let env = [env[0], env[1], ("POCKETRT_TUNE", on)];
    let args = [
        "bench",
        path,
        "--backend",
        "gpu",
        "-p",
        "4",
        "-n",
        "2",
        "-r",
        "1",
        "--json",
    ];
    let o = pocketrt(&args, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bench: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let backend = bench["tuned"].as_str().unwrap();
    let tuned = serde_json::from_value::<pocketrt::gpu::tune::Tuned>(r["tuned"].clone());
    let want = format!(
        "tuned design remembered from an earlier sweep: {}",
        tuned.unwrap()
    );
    assert!(backend.contains(&want), "{backend}\nwanted: {want}");
    let _ = std::fs::remove_dir_all(&dir);
}
