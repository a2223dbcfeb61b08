//! HF `tokenizer.json`: reading (BPE model, NFC normalizer, Split/ByteLevel pre-tokenizers,
//! ByteLevel decoder, TemplateProcessing post-processor, added tokens) and writing.

use super::pretokenize::StepSpec;
use super::{terr, AddedToken, Parts, Tokenizer, IN_MODEL};
use crate::error::Result;
use serde_json::{json, Map, Value};

fn kind(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

fn field<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Value> {
    v.get(key)
        .ok_or_else(|| terr(format!("tokenizer.json: {what} has no \"{key}\"")))
}

fn string<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| terr(format!("tokenizer.json: {what} is not a string")))
}

fn id_of(v: &Value, what: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| terr(format!("tokenizer.json: {what} is not a token id")))
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn unsupported(what: &str, v: &Value) -> crate::error::Error {
    let name = kind(v).map_or_else(|| v.to_string(), str::to_string);
    terr(format!("tokenizer.json: unsupported {what} {name}"))
}

pub(super) fn parse(text: &str) -> Result<Parts> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| terr(format!("tokenizer.json is not valid JSON: {e}")))?;
    if !root.is_object() {
        return Err(terr("tokenizer.json: the top level is not an object"));
    }
    let model = field(&root, "model", "the file")?;
    let (vocab, merges, ignore_merges) = parse_model(model)?;
    let added = match root.get("added_tokens") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(parse_added).collect::<Result<_>>()?,
        Some(_) => return Err(terr("tokenizer.json: added_tokens is not a list")),
    };
    let nfc = parse_normalizer(root.get("normalizer").unwrap_or(&Value::Null))?;
    let mut pre = Vec::new();
    parse_pre(root.get("pre_tokenizer").unwrap_or(&Value::Null), &mut pre)?;
    match root.get("decoder") {
        Some(d) if kind(d) == Some("ByteLevel") => {}
        Some(d) => return Err(unsupported("decoder (only ByteLevel)", d)),
        None => return Err(terr("tokenizer.json: no decoder (ByteLevel expected)")),
    }
    let find = |name: &str| -> Option<u32> {
        added
            .iter()
            .find(|t| t.content == name)
            .map(|t| t.id)
            .or_else(|| vocab.iter().find(|(p, _)| p == name).map(|(_, id)| *id))
    };
    let (mut prefix, mut suffix) = (Vec::new(), Vec::new());
    parse_post(
        root.get("post_processor").unwrap_or(&Value::Null),
        &mut prefix,
        &mut suffix,
    )?;
    let eos = [
        "<|im_end|>",
        "<|endoftext|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        "</s>",
    ]
    .iter()
    .filter_map(|n| added.iter().find(|t| t.special && t.content == *n))
    .map(|t| t.id)
    .collect();
    let bos = prefix.first().copied();
    let pad = find("<|endoftext|>").or_else(|| find("<pad>"));
    Ok(Parts {
        vocab,
        merges,
        added,
        nfc,
        pre,
        ignore_merges,
        prefix,
        suffix,
        bos,
        eos,
        pad,
    })
}

type Model = (Vec<(String, u32)>, Vec<(String, String)>, bool);

fn parse_model(m: &Value) -> Result<Model> {
    if let Some(k) = kind(m) {
        if k != "BPE" {
            return Err(unsupported("model (only BPE)", m));
        }
    }
    if !m.get("dropout").is_none_or(Value::is_null) {
        return Err(terr("tokenizer.json: BPE dropout is not supported"));
    }
    if flag(m, "byte_fallback") {
        return Err(terr("tokenizer.json: BPE byte_fallback is not supported"));
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if m.get(key)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(terr(format!("tokenizer.json: BPE {key} is not supported")));
        }
    }
    let vocab = field(m, "vocab", "model")?
        .as_object()
        .ok_or_else(|| terr("tokenizer.json: model.vocab is not an object"))?
        .iter()
        .map(|(k, v)| Ok((k.clone(), id_of(v, &format!("vocab entry {k:?}"))?)))
        .collect::<Result<Vec<_>>>()?;
    let merges = field(m, "merges", "model")?
        .as_array()
        .ok_or_else(|| terr("tokenizer.json: model.merges is not a list"))?
        .iter()
        .enumerate()
        .map(|(i, v)| parse_merge(i, v))
        .collect::<Result<Vec<_>>>()?;
    Ok((vocab, merges, flag(m, "ignore_merges")))
}

/// A merge is `"a b"` (older files) or `["a", "b"]` (tokenizers ≥ 0.20).
fn parse_merge(i: usize, v: &Value) -> Result<(String, String)> {
    let bad = || {
        terr(format!(
            "tokenizer.json: merge {i} ({v}) is not \"a b\" or [a, b]"
        ))
    };
    match v {
        Value::String(s) => {
            let mut it = s.split(' ');
            match (it.next(), it.next(), it.next()) {
                (Some(a), Some(b), None) => Ok((a.to_string(), b.to_string())),
                _ => Err(bad()),
            }
        }
        Value::Array(a) if a.len() == 2 => match (&a[0], &a[1]) {
            (Value::String(x), Value::String(y)) => Ok((x.clone(), y.clone())),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

fn parse_added(v: &Value) -> Result<AddedToken> {
    let id = id_of(field(v, "id", "an added token")?, "added token id")?;
    let content = string(
        field(v, "content", "an added token")?,
        "added token content",
    )?;
    Ok(AddedToken {
        id,
        content: content.to_string(),
        special: flag(v, "special"),
        normalized: flag(v, "normalized"),
        lstrip: flag(v, "lstrip"),
        rstrip: flag(v, "rstrip"),
        single_word: flag(v, "single_word"),
    })
}

/// `true` for NFC; `false` for none.
fn parse_normalizer(v: &Value) -> Result<bool> {
    match (v, kind(v)) {
        (Value::Null, _) => Ok(false),
        (_, Some("NFC")) => Ok(true),
        (_, Some("Sequence")) => {
            let list = field(v, "normalizers", "normalizer Sequence")?
                .as_array()
                .ok_or_else(|| terr("tokenizer.json: normalizers is not a list"))?;
            match list.as_slice() {
                [] => Ok(false),
                [one] => parse_normalizer(one),
                _ => Err(unsupported("normalizer", v)),
            }
        }
        _ => Err(unsupported("normalizer (only NFC)", v)),
    }
}

fn parse_pre(v: &Value, out: &mut Vec<StepSpec>) -> Result<()> {
    match (v, kind(v)) {
        (Value::Null, _) => Ok(()),
        (_, Some("Sequence")) => {
            let list = field(v, "pretokenizers", "pre_tokenizer Sequence")?
                .as_array()
                .ok_or_else(|| terr("tokenizer.json: pretokenizers is not a list"))?;
            list.iter().try_for_each(|p| parse_pre(p, out))
        }
        (_, Some("ByteLevel")) => {
            out.push(StepSpec::ByteLevel {
                add_prefix_space: flag(v, "add_prefix_space"),
                use_regex: v.get("use_regex").and_then(Value::as_bool).unwrap_or(true),
            });
            Ok(())
        }
        (_, Some("Split")) => {
            let behavior = v.get("behavior").and_then(Value::as_str).unwrap_or("");
            if behavior != "Isolated" || flag(v, "invert") {
                return Err(terr(format!(
                    "tokenizer.json: Split with behavior {behavior:?} invert {} is not \
                     supported (only Isolated, not inverted)",
                    flag(v, "invert")
                )));
            }
            let pat = field(v, "pattern", "Split")?;
            let regex = if let Some(r) = pat.get("Regex") {
                string(r, "Split pattern")?.to_string()
            } else if let Some(s) = pat.get("String") {
                fancy_regex::escape(string(s, "Split pattern")?).into_owned()
            } else {
                return Err(terr(
                    "tokenizer.json: Split pattern is neither Regex nor String",
                ));
            };
            out.push(StepSpec::Split(regex));
            Ok(())
        }
        _ => Err(unsupported("pre_tokenizer", v)),
    }
}

/// TemplateProcessing's `single` template: special tokens before `$A` go to `prefix`,
/// after it to `suffix`. ByteLevel (offsets only) and null add nothing.
fn parse_post(v: &Value, prefix: &mut Vec<u32>, suffix: &mut Vec<u32>) -> Result<()> {
    match (v, kind(v)) {
        (Value::Null, _) | (_, Some("ByteLevel")) => Ok(()),
        (_, Some("Sequence")) => field(v, "processors", "post_processor Sequence")?
            .as_array()
            .ok_or_else(|| terr("tokenizer.json: processors is not a list"))?
            .iter()
            .try_for_each(|p| parse_post(p, prefix, suffix)),
        (_, Some("TemplateProcessing")) => {
            let specials = field(v, "special_tokens", "TemplateProcessing")?;
            let single = field(v, "single", "TemplateProcessing")?
                .as_array()
                .ok_or_else(|| terr("tokenizer.json: TemplateProcessing.single is not a list"))?;
            let mut seen_a = false;
            for piece in single {
                if piece.get("Sequence").is_some() {
                    seen_a = true;
                } else if let Some(st) = piece.get("SpecialToken") {
                    let name = string(field(st, "id", "SpecialToken")?, "SpecialToken id")?;
                    let ids = specials
                        .get(name)
                        .and_then(|s| s.get("ids"))
                        .and_then(Value::as_array)
                        .ok_or_else(|| {
                            terr(format!("tokenizer.json: special token {name:?} has no ids"))
                        })?;
                    let dst = if seen_a { &mut *suffix } else { &mut *prefix };
                    for id in ids {
                        dst.push(id_of(id, "special token id")?);
                    }
                } else {
                    return Err(unsupported("TemplateProcessing piece", piece));
                }
            }
            Ok(())
        }
        _ => Err(unsupported("post_processor", v)),
    }
}

/// Writes the tokenizer as HF tokenizer.json.
pub(super) fn export(t: &Tokenizer) -> String {
    let mut vocab = Map::new();
    for (id, piece) in t.pieces.iter().enumerate() {
        if t.flags[id] & IN_MODEL != 0 {
            vocab.insert(piece.clone(), json!(id));
        }
    }
    // Merges as "a b" unless a piece contains a space (then as pairs, tokenizers ≥ 0.20).
    let spaced = t
        .merges
        .iter()
        .any(|&(a, b)| t.pieces[a as usize].contains(' ') || t.pieces[b as usize].contains(' '));
    let merges: Vec<Value> = t
        .merges
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (&t.pieces[a as usize], &t.pieces[b as usize]);
            if spaced {
                json!([a, b])
            } else {
                json!(format!("{a} {b}"))
            }
        })
        .collect();
    let added: Vec<Value> = t
        .added_tokens()
        .iter()
        .map(|a| {
            json!({"id": a.id, "content": a.content, "single_word": a.single_word,
                   "lstrip": a.lstrip, "rstrip": a.rstrip, "normalized": a.normalized,
                   "special": a.special})
        })
        .collect();
    let steps: Vec<Value> = t
        .pre
        .specs()
        .iter()
        .map(|s| match s {
            StepSpec::Split(p) => json!({"type": "Split", "pattern": {"Regex": p},
                                         "behavior": "Isolated", "invert": false}),
            StepSpec::ByteLevel {
                add_prefix_space,
                use_regex,
            } => json!({"type": "ByteLevel", "add_prefix_space": add_prefix_space,
                        "trim_offsets": false, "use_regex": use_regex}),
        })
        .collect();
    let pre = match steps.len() {
        0 => Value::Null,
        1 => steps.into_iter().next().unwrap_or(Value::Null),
        _ => json!({"type": "Sequence", "pretokenizers": steps}),
    };
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
                            "trim_offsets": false, "use_regex": false});
    let post = if t.prefix.is_empty() && t.suffix.is_empty() {
        byte_level.clone()
    } else {
        template_processing(t)
    };
    let root = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": if t.nfc { json!({"type": "NFC"}) } else { Value::Null },
        "pre_tokenizer": pre,
        "post_processor": post,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": "", "end_of_word_suffix": "",
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": t.ignore_merges,
            "vocab": vocab, "merges": merges,
        },
    });
    root.to_string()
}

fn template_processing(t: &Tokenizer) -> Value {
    let special = |id: &u32| json!({"SpecialToken": {"id": t.pieces[*id as usize], "type_id": 0}});
    let seq = |name: &str| json!({"Sequence": {"id": name, "type_id": 0}});
    let mut single: Vec<Value> = t.prefix.iter().map(special).collect();
    single.push(seq("A"));
    single.extend(t.suffix.iter().map(special));
    let mut pair = single.clone();
    pair.extend(t.prefix.iter().map(special));
    pair.push(seq("B"));
    pair.extend(t.suffix.iter().map(special));
    let mut specials = Map::new();
    for id in t.prefix.iter().chain(&t.suffix) {
        let name = &t.pieces[*id as usize];
        specials.insert(
            name.clone(),
            json!({"id": name, "ids": [id], "tokens": [name]}),
        );
    }
    json!({"type": "TemplateProcessing", "single": single, "pair": pair,
           "special_tokens": specials})
}

/// The smallest byte-level BPE `tokenizer.json`: the 256 byte tokens (ids 0..256, no
/// merges) followed by `specials` as special added tokens. For synthetic and test models.
pub fn byte_level_json(specials: &[&str]) -> String {
    let mut vocab = Map::new();
    for b in 0..=255u8 {
        vocab.insert(super::bytelevel::byte_to_char(b).to_string(), json!(b));
    }
    let added: Vec<Value> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| {
            vocab.insert(s.to_string(), json!(256 + i));
            json!({"id": 256 + i, "content": s, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
                            "trim_offsets": false, "use_regex": true});
    json!({
        "version": "1.0", "added_tokens": added, "normalizer": null,
        "pre_tokenizer": byte_level, "post_processor": null, "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    })
    .to_string()
}
