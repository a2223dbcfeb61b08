//! The tokenizer from GGUF metadata (`tokenizer.ggml.*`), model "gpt2" (byte-level BPE).
//!
//! Token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
//! 6 byte. Control tokens become special added tokens, user-defined ones plain added tokens
//! (both matched in text before BPE); the rest form the BPE vocabulary.

use super::pretokenize::{StepSpec, LLAMA3_PATTERN, QWEN2_PATTERN};
use super::{terr, AddedToken, Parts};
use crate::error::{Error, Result};
use crate::format::gguf::{Gguf, MetaValue};

const CONTROL: u64 = 3;
const USER_DEFINED: u64 = 4;

const SUPPORTED_PRE: &str = "qwen2, gpt-2, llama-bpe";

fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Vec<&'a str>> {
    let arr = g
        .get(key)
        .ok_or_else(|| Error::missing("GGUF tokenizer", key))?
        .as_array()
        .ok_or_else(|| terr(format!("GGUF {key} is not an array")))?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .ok_or_else(|| terr(format!("GGUF {key}[{i}] is not a string")))
        })
        .collect()
}

fn id(g: &Gguf, key: &str, n: usize) -> Result<Option<u32>> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64().and_then(|x| u32::try_from(x).ok()) {
            Some(x) if (x as usize) < n => Ok(Some(x)),
            _ => Err(terr(format!(
                "GGUF {key} = {v:?} is not a token id below {n}"
            ))),
        },
    }
}

pub(super) fn parse(g: &Gguf) -> Result<Parts> {
    let model = g
        .get_str("tokenizer.ggml.model")
        .ok_or_else(|| Error::missing("GGUF tokenizer", "tokenizer.ggml.model"))?;
    if model != "gpt2" {
        return Err(Error::Unsupported {
            what: "GGUF tokenizer".into(),
            kind: "tokenizer.ggml.model",
            name: model.into(),
            supported: "gpt2 (byte-level BPE)",
        });
    }
    let pre = g.get_str("tokenizer.ggml.pre").unwrap_or("default");
    let (steps, nfc) = match pre {
        "qwen2" => (
            vec![
                StepSpec::Split(QWEN2_PATTERN.into()),
                StepSpec::ByteLevel {
                    add_prefix_space: false,
                    use_regex: false,
                },
            ],
            true,
        ),
        "llama-bpe" | "llama3" => (
            vec![
                StepSpec::Split(LLAMA3_PATTERN.into()),
                StepSpec::ByteLevel {
                    add_prefix_space: false,
                    use_regex: false,
                },
            ],
            false,
        ),
        "gpt-2" | "gpt2" => (
            vec![StepSpec::ByteLevel {
                add_prefix_space: false,
                use_regex: true,
            }],
            false,
        ),
        other => {
            return Err(Error::Unsupported {
                what: "GGUF tokenizer".into(),
                kind: "pre-tokenizer (tokenizer.ggml.pre)",
                name: other.into(),
                supported: SUPPORTED_PRE,
            })
        }
    };

    let tokens = strings(g, "tokenizer.ggml.tokens")?;
    let n = tokens.len();
    let types: Vec<u64> = match g.get("tokenizer.ggml.token_type") {
        None => vec![1; n],
        Some(v) => {
            let arr = v
                .as_array()
                .ok_or_else(|| terr("GGUF tokenizer.ggml.token_type is not an array"))?;
            if arr.len() != n {
                return Err(terr(format!(
                    "GGUF tokenizer.ggml.token_type has {} entries for {n} tokens",
                    arr.len()
                )));
            }
            arr.iter()
                .map(|t| MetaValue::as_u64(t).unwrap_or(1))
                .collect()
        }
    };
    let mut vocab = Vec::with_capacity(n);
    let mut added = Vec::new();
    for (i, (tok, ty)) in tokens.iter().zip(&types).enumerate() {
        let id = u32::try_from(i).map_err(|_| terr("GGUF vocabulary too large"))?;
        if *ty == CONTROL || *ty == USER_DEFINED {
            added.push(AddedToken {
                id,
                content: tok.to_string(),
                special: *ty == CONTROL,
                normalized: false,
                lstrip: false,
                rstrip: false,
                single_word: false,
            });
        } else {
            vocab.push((tok.to_string(), id));
        }
    }
    let merges = match g.get("tokenizer.ggml.merges") {
        None => Vec::new(),
        Some(_) => strings(g, "tokenizer.ggml.merges")?
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.split_once(' ')
                    .filter(|(_, b)| !b.contains(' '))
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| terr(format!("GGUF merge {i} {m:?} is not \"a b\"")))
            })
            .collect::<Result<_>>()?,
    };
    let bos = id(g, "tokenizer.ggml.bos_token_id", n)?;
    let add_bos = g
        .get("tokenizer.ggml.add_bos_token")
        .and_then(MetaValue::as_bool)
        == Some(true);
    let add_eos = g
        .get("tokenizer.ggml.add_eos_token")
        .and_then(MetaValue::as_bool)
        == Some(true);
    let eos_id = id(g, "tokenizer.ggml.eos_token_id", n)?;
    let mut eos = Vec::new();
    for key in ["eos", "eot", "eom"] {
        if let Some(x) = id(g, &format!("tokenizer.ggml.{key}_token_id"), n)? {
            if !eos.contains(&x) {
                eos.push(x);
            }
        }
    }
    Ok(Parts {
        vocab,
        merges,
        added,
        nfc,
        pre: steps,
        // HF's Llama 3 tokenizer.json sets ignore_merges.
        ignore_merges: matches!(pre, "llama-bpe" | "llama3"),
        prefix: if add_bos {
            bos.into_iter().collect()
        } else {
            Vec::new()
        },
        suffix: if add_eos {
            eos_id.into_iter().collect()
        } else {
            Vec::new()
        },
        bos,
        eos,
        pad: id(g, "tokenizer.ggml.padding_token_id", n)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Tokenizer;
    use super::*;

    fn gguf(model: &str, pre: &str, types: Vec<MetaValue>) -> Gguf {
        let s = |x: &str| MetaValue::String(x.into());
        let meta = vec![
            ("tokenizer.ggml.model".to_string(), s(model)),
            ("tokenizer.ggml.pre".to_string(), s(pre)),
            (
                "tokenizer.ggml.tokens".to_string(),
                MetaValue::Array(vec![s("a"), s("b"), s("ab"), s("<|end|>")]),
            ),
            (
                "tokenizer.ggml.token_type".to_string(),
                MetaValue::Array(types),
            ),
            (
                "tokenizer.ggml.merges".to_string(),
                MetaValue::Array(vec![s("a b")]),
            ),
            ("tokenizer.ggml.eos_token_id".to_string(), MetaValue::U32(3)),
        ];
        Gguf {
            version: 3,
            alignment: 32,
            metadata: meta,
            tensors: Vec::new(),
            data_offset: 0,
            file_len: None,
        }
    }

    fn types(t: &[i32]) -> Vec<MetaValue> {
        t.iter().map(|&x| MetaValue::I32(x)).collect()
    }

    #[test]
    fn gguf_vocab_with_control_token_encodes_and_reports_eos() {
        let tok = Tokenizer::from_gguf(&gguf("gpt2", "qwen2", types(&[1, 1, 1, 3]))).unwrap();
        assert_eq!(tok.encode("ab<|end|>", false), vec![2, 3]);
        assert_eq!(tok.eos_ids(), &[3]);
        assert!(tok.is_special(3));
    }

    #[test]
    fn unsupported_model_or_pre_and_bad_metadata_are_typed_errors() {
        let e = Tokenizer::from_gguf(&gguf("llama", "qwen2", types(&[1, 1, 1, 3])))
            .err()
            .unwrap();
        assert!(
            matches!(&e, Error::Unsupported { name, .. } if name == "llama"),
            "{e}"
        );
        let e = Tokenizer::from_gguf(&gguf("gpt2", "deepseek-coder", types(&[1, 1, 1, 3])))
            .err()
            .unwrap();
        assert!(
            matches!(&e, Error::Unsupported { name, .. } if name == "deepseek-coder"),
            "{e}"
        );
        let e = Tokenizer::from_gguf(&gguf("gpt2", "gpt-2", types(&[1, 1])))
            .err()
            .unwrap();
        assert!(
            matches!(&e, Error::Tokenizer(m) if m.contains("token_type")),
            "{e}"
        );
        let mut g = gguf("gpt2", "gpt-2", types(&[1, 1, 1, 3]));
        g.metadata
            .push(("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(99)));
        let e = Tokenizer::from_gguf(&g).err().unwrap();
        assert!(
            matches!(&e, Error::Tokenizer(m) if m.contains("bos_token_id")),
            "{e}"
        );
    }
}
