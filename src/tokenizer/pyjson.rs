//! Python's `json.dumps`, as HF's chat templates see it through their `tojson` filter
//! (`ensure_ascii=False`, separators `", "` / `": "`, keys in insertion order).

use serde_json::Value;
use std::fmt::Write;

pub struct Options {
    pub indent: Option<usize>,
    pub ensure_ascii: bool,
    pub sort_keys: bool,
    /// (item separator, key separator); Python's default depends on `indent`.
    pub separators: Option<(String, String)>,
}

pub fn dumps(v: &Value, o: &Options) -> String {
    let (item, key) = o.separators.clone().unwrap_or_else(|| match o.indent {
        None => (", ".into(), ": ".into()),
        Some(_) => (",".into(), ": ".into()),
    });
    let mut out = String::new();
    write_value(&mut out, v, o, &item, &key, 0);
    out
}

fn newline(out: &mut String, o: &Options, depth: usize) {
    if let Some(n) = o.indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', n * depth));
    }
}

fn write_value(out: &mut String, v: &Value, o: &Options, item: &str, key: &str, depth: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) => out.push_str(&float_repr(f)),
            _ => out.push_str("null"),
        },
        Value::String(s) => write_str(out, s, o.ensure_ascii),
        Value::Array(a) if a.is_empty() => out.push_str("[]"),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(out, o, depth + 1);
                write_value(out, x, o, item, key, depth + 1);
            }
            newline(out, o, depth);
            out.push(']');
        }
        Value::Object(m) if m.is_empty() => out.push_str("{}"),
        Value::Object(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            if o.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(out, o, depth + 1);
                write_str(out, k, o.ensure_ascii);
                out.push_str(key);
                write_value(out, x, o, item, key, depth + 1);
            }
            newline(out, o, depth);
            out.push('}');
        }
    }
}

fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7E) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form outside [1e-4, 1e16).
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Rust: "1e-5" / "1.5e20"; Python: "1e-05" / "1.5e+20".
        let s = format!("{f:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mant}e{sign}{digits:0>2}");
    }
    let s = format!("{f}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain() -> Options {
        Options {
            indent: None,
            ensure_ascii: false,
            sort_keys: false,
            separators: None,
        }
    }

    #[test]
    fn dumps_matches_python_json_dumps_defaults() {
        let v = json!({"b": [1, 2.5, null, true], "a": "x\"y\n中", "e": {}, "f": 1e-5});
        assert_eq!(
            dumps(&v, &plain()),
            r#"{"b": [1, 2.5, null, true], "a": "x\"y\n中", "e": {}, "f": 1e-05}"#
        );
        let o = Options {
            indent: Some(2),
            ensure_ascii: true,
            sort_keys: true,
            separators: None,
        };
        assert_eq!(
            dumps(&json!({"b": [1], "a": "é😀"}), &o),
            "{\n  \"a\": \"\\u00e9\\ud83d\\ude00\",\n  \"b\": [\n    1\n  ]\n}"
        );
        assert_eq!(float_repr(3.0), "3.0");
        assert_eq!(float_repr(1.5e20), "1.5e+20");
    }
}
