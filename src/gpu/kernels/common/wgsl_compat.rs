//! The WGSL a device compiles. Where WGSL's `packed_4x8_integer_dot_product` language
//! extension is missing (Safari does not advertise it; naga and Chromium have it), the
//! shaders' calls of its builtins are replaced by functions of shifts and masks with the
//! same results (`shaders/common/packed_4x8_polyfill.wgsl`), appended to the shader. Elsewhere
//! the source is compiled as written (byte for byte). `KernelPipeline::new` runs every
//! shader through [`wgsl_for`], so no kernel needs its own variant.

use std::borrow::Cow;

/// The extension's builtins: none may be left in a shader compiled without it.
pub const PACKED_4X8_BUILTINS: [&str; 8] = [
    "dot4U8Packed",
    "dot4I8Packed",
    "pack4xI8",
    "pack4xU8",
    "pack4xI8Clamp",
    "pack4xU8Clamp",
    "unpack4xI8",
    "unpack4xU8",
];

/// The builtins the shaders use, and their replacements in the polyfill.
const REPLACED: [(&str, &str); 1] = [("unpack4xU8(", "u8x4_unpacked(")];

const POLYFILL_WGSL: &str = include_str!("../../../../shaders/common/packed_4x8_polyfill.wgsl");

/// `source` as a device with (`packed_4x8`) or without the extension compiles it.
pub fn wgsl_for(packed_4x8: bool, source: &str) -> Cow<'_, str> {
    let used = REPLACED.iter().any(|(call, _)| source.contains(call));
    if packed_4x8 || !used {
        return Cow::Borrowed(source);
    }
    let mut out = source.to_string();
    for (call, replacement) in REPLACED {
        out = out.replace(call, replacement);
    }
    out.push('\n');
    out.push_str(POLYFILL_WGSL);
    Cow::Owned(out)
}

/// Whether `text` calls the function `name` (an identifier of its own followed by `(`;
/// not a mention in a comment).
pub fn calls(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].trim_start().chars().next();
        !before.is_some_and(ident) && after == Some('(')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shader fragment of the crate, by path.
    fn shaders() -> Vec<(String, String)> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
        let mut out = vec![];
        let mut dirs = vec![std::path::PathBuf::from(root)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "wgsl") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    out.push((path.display().to_string(), text));
                }
            }
        }
        out
    }

    #[test]
    fn without_the_extension_no_shader_calls_its_builtins() {
        let all = shaders();
        assert!(all.len() > 40, "{} shaders", all.len());
        let mut polyfilled = 0;
        for (path, text) in &all {
            let out = wgsl_for(false, text);
            polyfilled += usize::from(matches!(out, Cow::Owned(_)));
            for builtin in PACKED_4X8_BUILTINS {
                assert!(!calls(&out, builtin), "{path} still calls {builtin}");
            }
            // With the extension: compiled as written.
            assert!(matches!(wgsl_for(true, text), Cow::Borrowed(t) if t == text));
        }
        assert!(polyfilled >= 2, "the Q4 unpacking fragments use unpack4xU8");
        assert!(calls("x = unpack4xU8 (w);", "unpack4xU8"));
        assert!(!calls("// not unpack4xU8, which", "unpack4xU8"));
        assert!(!calls("my_unpack4xU8(w)", "unpack4xU8"));
    }
}
