//! The two kernel families stay apart (docs/ARCHITECTURE.md, `src/gpu/kernels/`): the GPU
//! designs (the files directly in src/gpu/kernels/) and the CPU adapters' designs
//! (src/gpu/kernels/soft/) never import each other, and what both use (src/gpu/kernels/
//! common/) imports neither. Likewise their shaders: GPU designs include top-level
//! shaders/*.wgsl only, soft designs shaders/soft/ only, and the fragments both families
//! use live under shaders/common/, included by common/ alone. The device profile
//! (src/gpu/profile.rs) imports no forward pass (`gpu::forward`): the predicates it asks
//! stand beside their designs in common/. The device (src/gpu/device.rs) imports no
//! profile, kernel or forward pass, and no kernel reads the profile. Reads the sources;
//! no device.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gpu/kernels")
}

/// The `.rs` files of `dir` (not its subfolders).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    files
}

/// The GPU design modules: src/gpu/kernels/*.rs but mod.rs.
fn gpu_modules() -> BTreeSet<String> {
    rust_files(&kernels_dir())
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "mod")
        .collect()
}

/// `path`'s code without its comment lines (docs may name the other family).
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `code` names right after `prefix` (`kernels::`, `super::`): `a` in
/// `kernels::a::B`, and `a`, `b` in `kernels::{a::X, b, C}` (first segments only).
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        // Only whole path segments: `xkernels::` is not `kernels::`.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // A brace group: its top-level items' first segments.
            let (mut depth, mut item_start, mut end) = (0usize, 0usize, group.len());
            let mut items = Vec::new();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[item_start..i]);
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
            items.push(&group[item_start..end]);
            names.extend(
                items
                    .iter()
                    .map(|i| ident(i.trim()))
                    .filter(|n| !n.is_empty()),
            );
        } else {
            names.insert(ident(rest));
        }
    }
    names
}

/// The modules of src/gpu/kernels/ that `path` (in `folder`: "" for the GPU designs,
/// "soft" or "common") names.
fn kernel_modules_named(path: &Path, folder: &str) -> BTreeSet<String> {
    let code = code_of(path);
    let mut names = named_after(&code, "kernels::");
    if folder.is_empty() {
        names.extend(named_after(&code, "super::"));
    } else {
        names.extend(named_after(&code, "super::super::"));
    }
    names
}

/// The shader files `path` includes (`include_str!`), relative to the repository root.
fn shaders_included(path: &Path) -> Vec<String> {
    let code = code_of(path);
    code.match_indices("include_str!(\"")
        .map(|(at, m)| {
            let rest = &code[at + m.len()..];
            let file = &rest[..rest.find('"').unwrap()];
            let shaders = file.find("shaders/").expect("shaders are under shaders/");
            file[shaders..].to_string()
        })
        .collect()
}

#[test]
fn soft_designs_name_no_gpu_design() {
    let gpu = gpu_modules();
    assert!(
        gpu.contains("attention") && gpu.contains("gemv_q4"),
        "{gpu:?}"
    );
    for file in rust_files(&kernels_dir().join("soft")) {
        let crossed: Vec<_> = kernel_modules_named(&file, "soft")
            .intersection(&gpu)
            .cloned()
            .collect();
        assert!(
            crossed.is_empty(),
            "{} imports GPU design modules {crossed:?}: move what both use to \
             src/gpu/kernels/common/, or choose the design in src/gpu/forward/designs/",
            file.display()
        );
    }
}

#[test]
fn gpu_designs_name_no_soft_design() {
    for file in rust_files(&kernels_dir()) {
        if file.ends_with("mod.rs") {
            continue;
        }
        let named = kernel_modules_named(&file, "");
        assert!(
            !named.contains("soft"),
            "{} imports the CPU adapters' designs (`soft`): move what both use to \
             src/gpu/kernels/common/, or choose the design in src/gpu/forward/designs/",
            file.display()
        );
    }
}

#[test]
fn common_names_neither_family() {
    let gpu = gpu_modules();
    for file in rust_files(&kernels_dir().join("common")) {
        let named = kernel_modules_named(&file, "common");
        let crossed: Vec<_> = named
            .iter()
            .filter(|m| gpu.contains(*m) || *m == "soft")
            .collect();
        assert!(
            crossed.is_empty(),
            "{} (shared by both families) imports {crossed:?}",
            file.display()
        );
    }
}

#[test]
fn shader_includes_stay_in_their_family() {
    let top = |s: &str| s.strip_prefix("shaders/").is_some_and(|f| !f.contains('/'));
    let mut gpu_shaders = BTreeSet::new();
    for file in rust_files(&kernels_dir()) {
        for s in shaders_included(&file) {
            assert!(top(&s), "{} (a GPU design) includes {s}", file.display());
            gpu_shaders.insert(s);
        }
    }
    for file in rust_files(&kernels_dir().join("soft")) {
        for s in shaders_included(&file) {
            assert!(
                s.starts_with("shaders/soft/"),
                "{} (a soft design) includes {s}: shared fragments come through common/",
                file.display()
            );
        }
    }
    for file in rust_files(&kernels_dir().join("common")) {
        for s in shaders_included(&file) {
            assert!(
                s.starts_with("shaders/common/"),
                "{} (shared) includes {s}: shared fragments live under shaders/common/",
                file.display()
            );
            assert!(
                !gpu_shaders.contains(&s),
                "{s} is included by common/ and by a GPU design: one owner (common/)"
            );
        }
    }
}

#[test]
fn the_profile_imports_no_forward_pass() {
    let gpu = kernels_dir().parent().unwrap().to_path_buf();
    for file in [gpu.join("profile.rs"), gpu.join("profile/designs.rs")] {
        let code = code_of(&file);
        let named = named_after(&code, "gpu::");
        let up = named_after(&code, "super::");
        assert!(
            !named.contains("forward") && !up.contains("forward"),
            "{} imports `gpu::forward`: move the predicate beside its design in \
             src/gpu/kernels/common/",
            file.display()
        );
    }
}

/// The device (src/gpu/device.rs: `GpuContext`) knows no design: it imports no profile,
/// no kernel and no forward pass (the profile travels with the model,
/// src/gpu/profiled.rs).
#[test]
fn the_device_imports_no_profile_or_kernel() {
    let file = kernels_dir().parent().unwrap().join("device.rs");
    let code = code_of(&file);
    let mut named = named_after(&code, "gpu::");
    named.extend(named_after(&code, "super::"));
    let design: Vec<_> = ["profile", "profiled", "kernels", "forward", "tune", "plan"]
        .into_iter()
        .filter(|m| named.contains(*m))
        .collect();
    assert!(
        design.is_empty(),
        "{} imports {design:?}: the device knows no design; pass what a kernel needs \
         as values, and hold the profile beside the device (`ProfiledContext`)",
        file.display()
    );
}

/// No kernel wrapper reads the profile: its constructor is handed the values it needs.
#[test]
fn kernels_read_no_profile() {
    let mut files = rust_files(&kernels_dir());
    files.extend(rust_files(&kernels_dir().join("soft")));
    files.extend(rust_files(&kernels_dir().join("common")));
    assert!(files.len() > 30, "{} kernel files", files.len());
    for file in files {
        let code = code_of(&file);
        for name in ["DeviceProfile", "ProfiledContext", ".profile", "profile::"] {
            assert!(
                !code.contains(name),
                "{} names `{name}`: hand the kernel's constructor the profile's values \
                 (in src/gpu/forward/designs/ or the step)",
                file.display()
            );
        }
    }
}

#[test]
fn named_after_reads_paths_and_groups() {
    let code = "use crate::gpu::kernels::gemv_q4::X;\nuse super::{attention::{A, B}, Slot};\n\
                use mykernels::soft::Y;";
    let k: Vec<_> = named_after(code, "kernels::").into_iter().collect();
    assert_eq!(k, ["gemv_q4"]);
    let s: Vec<_> = named_after(code, "super::").into_iter().collect();
    assert_eq!(s, ["Slot", "attention"]);
}
