//! The per-invocation state of the CPU-adapter attention kernels
//! (shaders/soft/attention_prefill_lanes.wgsl, shaders/soft/attention_lanes.wgsl): one invocation
//! holds a GQA group's queries, accumulators and softmax statistics and walks the keys one
//! at a time. Written out member by member as a WGSL struct of vec4s (a private array
//! would live in memory on lavapipe, every access going lane by lane), with the functions
//! the kernels call; shaders/soft/attention_lanes_common.wgsl holds the fixed helpers.

/// softmax_step, prepended (after [`crate::gpu::kernels::KV_VEC4_WGSL`]: f16x4) before
/// [`state_wgsl`]'s output.
pub(crate) const LANES_COMMON_WGSL: &str =
    include_str!("../../../../shaders/soft/attention_lanes_common.wgsl");

/// Where a lanes kernel's queries come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queries {
    /// Roped already, in the kernel's `q: array<vec4<f32>>` (prefill).
    Roped,
    /// Raw in the QKV output: normed and roped in `state_init` through the kernel's
    /// `norm_factor(src)` and `rope4(src, d, inv, true)`; with `state_step_now` for this
    /// step's own key (also `pack4`, `qkv4`) (decode, attention_lanes.wgsl).
    FromQkv,
}

/// The lanes kernel's `State` for `group` q heads of `n` vec4s each (see the shader's
/// header) and its functions, written out member by member so that they stay in
/// registers: q of head g is `q{g}_{d}`, its accumulator `a{g}_{d}`, its running max and
/// sum `m{g}`, `l{g}`; `row` is the vec4 index of the group's first head in q and out.
pub(crate) fn state_wgsl(group: usize, n: usize, queries: Queries) -> String {
    let mut members = String::new();
    let (mut init, mut step, mut store) = (Vec::new(), String::new(), String::new());
    // The init's lets before the State (FromQkv): the group's first head and the heads'
    // norm factors.
    let mut factors = match queries {
        Queries::Roped => String::new(),
        Queries::FromQkv => format!("    let h0 = row / {n}u;\n"),
    };
    // The key's loads: from the caches (`step`), or this step's own k and v computed
    // from qkv, written to the caches at `at` when `write` (`now`, decode).
    let mut now = String::from(
        "    let k_src = (N_HEADS + kv) * HD;\n    let v_src = (N_HEADS + N_KV + kv) * HD;\n\
         \x20   let inv = norm_factor(k_src);\n",
    );
    for d in 0..n {
        step += &format!("    let k{d} = f16x4(k_cache[key + {d}u]);\n");
        step += &format!("    let v{d} = f16x4(v_cache[key + {d}u]);\n");
        now += &format!(
            "    let kp{d} = pack4(rope4(k_src, {d}u, inv, false));\n\
             \x20   let vp{d} = pack4(qkv4(v_src, {d}u));\n\
             \x20   if (write) {{\n        k_cache[at + {d}u] = kp{d};\n        v_cache[at + {d}u] = vp{d};\n    }}\n\
             \x20   let k{d} = f16x4(kp{d});\n    let v{d} = f16x4(vp{d});\n"
        );
    }
    // The online-softmax update with that key, for every head.
    let mut update = String::new();
    for g in 0..group {
        let dot: Vec<String> = (0..n).map(|d| format!("dot(s.q{g}_{d}, k{d})")).collect();
        update += &format!(
            "    let f{g} = softmax_step(s.m{g}, s.l{g}, {}, seen);\n    r.m{g} = f{g}.x;\n    r.l{g} = f{g}.y;\n",
            dot.join(" + ")
        );
        if queries == Queries::FromQkv {
            factors += &format!("    let n{g} = norm_factor((h0 + {g}u) * HD);\n");
        }
        for d in 0..n {
            members += &format!("q{g}_{d}: vec4<f32>, a{g}_{d}: vec4<f32>, ");
            let q = match queries {
                Queries::Roped => format!("q[row + {}u]", g * n + d),
                Queries::FromQkv => format!("rope4((h0 + {g}u) * HD, {d}u, n{g}, true)"),
            };
            init.push(format!("{q} * scale, vec4<f32>(0.0)"));
            update += &format!("    r.a{g}_{d} = s.a{g}_{d} * f{g}.z + f{g}.w * v{d};\n");
            store += &format!("    out[row + {}u] = s.a{g}_{d} / s.l{g};\n", g * n + d);
        }
        members += &format!("m{g}: f32, l{g}: f32,\n");
    }
    let start: Vec<String> = (0..group).map(|_| "-3.4e38, 0.0".into()).collect();
    // Members are declared per head as q, a pairs, then m, l: init follows that order.
    let init: Vec<String> = (0..group)
        .map(|g| format!("{}, {}", init[g * n..][..n].join(", "), start[g]))
        .collect();
    let step_now = match queries {
        Queries::Roped => String::new(),
        Queries::FromQkv => format!(
            "// This step's own key and value (KV head `kv`, from qkv: k normed and roped, both\n\
             // rounded to f16 as the cache holds them), written to the caches at vec2 `at`\n\
             // when `write`.\n\
             fn state_step_now(s: State, kv: u32, write: bool, at: u32) -> State {{\n    \
             var r = s;\n    let seen = true;\n{now}{update}    return r;\n}}\n"
        ),
    };
    format!(
        "struct State {{\n{members}}}\n\
         // The group's q (times `scale`) at vec4 `row`; empty accumulators.\n\
         fn state_init(row: u32, scale: f32) -> State {{\n{factors}    return State({init});\n}}\n\
         // One key (and value) at vec2 `key` of the caches, for every head of the group.\n\
         fn state_step(s: State, key: u32, seen: bool) -> State {{\n    var r = s;\n{step}{update}    return r;\n}}\n\
         {step_now}\
         // The normalised outputs at vec4 `row`.\n\
         fn state_store(row: u32, s: State) {{\n{store}}}\n",
        init = init.join(",\n        "),
    )
}

/// `state_store_partial(h0, split, splits, s)` for the split decode kernel: head `h0 + g`
/// of the group writes its unnormalised accumulator (HD values), running max and sum to
/// `partials` at `((h0 + g) · splits + split) · (HD + 2)`, the layout of
/// shaders/attention_combine.wgsl (the kernel declares `partials: array<f32>`).
pub(crate) fn state_partial_wgsl(group: usize, n: usize) -> String {
    let mut body = String::new();
    for g in 0..group {
        body += &format!("    let b{g} = ((h0 + {g}u) * splits + split) * (HD + 2u);\n");
        for d in 0..n {
            for (c, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                body += &format!("    partials[b{g} + {}u] = s.a{g}_{d}.{lane};\n", 4 * d + c);
            }
        }
        body +=
            &format!("    partials[b{g} + HD] = s.m{g};\n    partials[b{g} + HD + 1u] = s.l{g};\n");
    }
    format!("fn state_store_partial(h0: u32, split: u32, splits: u32, s: State) {{\n{body}}}\n")
}

/// `state_project(h, part, lane, s)` for the decode heads mapping, whose State holds one
/// head (h) of `n` vec4s: with `fold`, the normalised outputs of the subgroup's heads (the
/// workgroup's active lanes) through their W_o columns, summed over the subgroup into
/// `parts[part][..]`, stored by lane 0 (shaders/soft/attention_lanes_wo.wgsl: bindings,
/// `wo_dot`, `wo_word`; the wrapper's `code4`); else nothing. The head's HD / 8 code words
/// are written out so that its output stays in registers, loaded 4 at a time where the
/// head's columns start a vec4 of words (HD % 32 == 0), else one by one; words of one Q4
/// group share its qparams: runs of 8 when HD % 64 == 0 (each head starts a group), else
/// each word looks its group up.
pub(crate) fn state_project_wgsl(n: usize, fold: bool) -> String {
    if !fold {
        return "fn state_project(h: u32, part: u32, lane: u32, s: State) {}\n".into();
    }
    let words = n / 2;
    let run = if (4 * n).is_multiple_of(64) { 8 } else { 1 };
    let mut pre = String::from("    let inv = 1.0 / s.l0;\n");
    for d in 0..n {
        pre += &format!("    let o{d} = s.a0_{d} * inv;\n");
    }
    let by4 = n.is_multiple_of(8);
    let mut row = String::new();
    if by4 {
        for m in 0..words / 4 {
            row += &format!("        let w{m} = code4(c / 4u + {m}u);\n");
        }
    }
    for (k, first) in (0..words).step_by(run).enumerate() {
        let seg = first..(first + run).min(words);
        let sum: Vec<String> = seg
            .clone()
            .map(|j| format!("o{} + o{}", 2 * j, 2 * j + 1))
            .collect();
        pre += &format!("    let z{k} = dot({}, vec4<f32>(1.0));\n", sum.join(" + "));
        let word = |j: usize| match by4 {
            true => format!("w{}.{}", j / 4, ["x", "y", "z", "w"][j % 4]),
            false => format!("wo_word(c + {j}u)"),
        };
        let dots: Vec<String> = seg
            .map(|j| format!("wo_dot({}, o{}, o{})", word(j), 2 * j, 2 * j + 1))
            .collect();
        row += &format!(
            "        let p{k} = unpack2x16float(wo_qparams[q + (h * HD + {}u) / 64u]);\n\
             \x20       acc += p{k}.x * ({}) + p{k}.y * z{k};\n",
            8 * first,
            dots.join(" + ")
        );
    }
    format!(
        "// The workgroup's heads' normalised outputs through their W_o columns, summed over\n\
         // the subgroup, for every row.\n\
         fn state_project(h: u32, part: u32, lane: u32, s: State) {{\n{pre}\
         \x20   let words = N_HEADS * HD / 8u;\n\
         \x20   let groups = N_HEADS * HD / 64u;\n\
         \x20   for (var r = 0u; r < HIDDEN; r++) {{\n\
         \x20       let c = r * words + h * (HD / 8u);\n\
         \x20       let q = r * groups;\n\
         \x20       var acc = 0.0;\n{row}\
         \x20       let sum = subgroupAdd(acc);\n\
         \x20       if (lane == 0u) {{\n            parts[part * HIDDEN + r] = sum;\n        }}\n    }}\n}}\n"
    )
}

/// `state_merge(h, splits)` for the decode combine of the lanes design with W_o folded
/// in (shaders/soft/attention_lanes_combine.wgsl), whose State holds one head of `n` vec4s:
/// head h's `splits` partial results (shaders/attention_combine.wgsl's layout) merged
/// into the State's accumulator and sum (`m0` their max score), ready for `state_store`
/// and `state_project`.
pub(crate) fn state_merge_wgsl(n: usize) -> String {
    let mut zero = String::new();
    let mut add = String::new();
    for d in 0..n {
        zero += "vec4<f32>(0.0), vec4<f32>(0.0), ";
        add += &format!(
            "        r.a0_{d} += f * vec4<f32>(partials[at + {0}u], partials[at + {1}u], \
             partials[at + {2}u], partials[at + {3}u]);\n",
            4 * d,
            4 * d + 1,
            4 * d + 2,
            4 * d + 3
        );
    }
    format!(
        "// Head h's partial results of `splits` splits, merged.\n\
         fn state_merge(h: u32, splits: u32) -> State {{\n\
         \x20   let stride = HD + 2u;\n\
         \x20   let at0 = h * splits * stride;\n\
         \x20   var big_m = -3.4e38;\n\
         \x20   for (var s = 0u; s < splits; s++) {{\n\
         \x20       big_m = max(big_m, partials[at0 + s * stride + HD]);\n    }}\n\
         \x20   var r = State({zero}big_m, 0.0);\n\
         \x20   for (var s = 0u; s < splits; s++) {{\n\
         \x20       let at = at0 + s * stride;\n\
         \x20       let f = exp(partials[at + HD] - big_m);\n\
         \x20       r.l0 += f * partials[at + HD + 1u];\n{add}    }}\n\
         \x20   return r;\n}}\n"
    )
}
