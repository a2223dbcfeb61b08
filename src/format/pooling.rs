//! [`Pooling`]: how a sequence's token rows become one embedding vector — a property of
//! the model that its files declare (a GGUF's `<arch>.pooling_type`, a
//! sentence-transformers folder's `1_Pooling/config.json`, a package's manifest), so the
//! readers here read it; the pooling itself is done in `crate::embed`.

use crate::error::{Error, Result};

/// How a sequence's token rows become one vector. GGUF's `<arch>.pooling_type`: 1 mean,
/// 2 cls, 3 last (0 "none" and unknown values: not an embedding model's choice, so the
/// default, [`Pooling::Last`], applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The last token's row (decoder embedding models: Qwen3-Embedding, e5-mistral).
    #[default]
    Last,
    /// The mean of every token's row.
    Mean,
    /// The first token's row (BERT's `[CLS]`).
    Cls,
}

impl Pooling {
    /// By name: `last`, `mean`, `cls` (also `first`).
    pub fn from_name(name: &str) -> Result<Pooling> {
        match name {
            "last" => Ok(Pooling::Last),
            "mean" => Ok(Pooling::Mean),
            "cls" | "first" => Ok(Pooling::Cls),
            _ => Err(Error::InvalidArgument(format!(
                "unknown pooling {name:?} (expected last, mean or cls)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pooling::Last => "last",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }

    /// GGUF's `pooling_type` value (llama.cpp's `enum llama_pooling_type`), `None` for
    /// values that name no pooling of a sequence (0 none, 4 rank, unknown).
    pub fn from_gguf_type(value: i64) -> Option<Pooling> {
        match value {
            1 => Some(Pooling::Mean),
            2 => Some(Pooling::Cls),
            3 => Some(Pooling::Last),
            _ => None,
        }
    }

    /// The model's pooling from GGUF metadata (`<general.architecture>.pooling_type`).
    pub fn from_gguf(g: &super::gguf::Gguf) -> Option<Pooling> {
        let arch = g.get_str("general.architecture")?;
        let value = g.get(&format!("{arch}.pooling_type"))?.as_i64()?;
        Pooling::from_gguf_type(value)
    }

    /// A sentence-transformers folder's pooling (`1_Pooling/config.json`:
    /// `pooling_mode_lasttoken`, `_mean_tokens`, `_cls_token`); `None` without one.
    pub fn of_sentence_transformers(dir: &std::path::Path) -> Result<Option<Pooling>> {
        let file = dir.join("1_Pooling").join("config.json");
        let Ok(text) = std::fs::read_to_string(&file) else {
            return Ok(None);
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::corrupt(file.display().to_string(), e.to_string()))?;
        let on = |key: &str| v[key].as_bool() == Some(true);
        Ok(if on("pooling_mode_lasttoken") {
            Some(Pooling::Last)
        } else if on("pooling_mode_mean_tokens") {
            Some(Pooling::Mean)
        } else if on("pooling_mode_cls_token") {
            Some(Pooling::Cls)
        } else {
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_pooling_types_and_names() {
        assert_eq!(Pooling::from_gguf_type(1), Some(Pooling::Mean));
        assert_eq!(Pooling::from_gguf_type(2), Some(Pooling::Cls));
        assert_eq!(Pooling::from_gguf_type(3), Some(Pooling::Last));
        for none in [-1, 0, 4, 99] {
            assert_eq!(Pooling::from_gguf_type(none), None);
        }
        for p in [Pooling::Last, Pooling::Mean, Pooling::Cls] {
            assert_eq!(Pooling::from_name(p.name()).unwrap(), p);
        }
        assert!(matches!(
            Pooling::from_name("max"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn the_pooling_comes_from_gguf_metadata_and_sentence_transformers_folders() {
        use crate::format::gguf::{Gguf, MetaValue};
        use crate::format::gguf_write::GgufWriter;
        let header = |pooling: Option<MetaValue>| {
            let mut w = GgufWriter::new();
            w.meta("general.architecture", MetaValue::String("qwen3".into()));
            if let Some(v) = pooling {
                w.meta("qwen3.pooling_type", v);
            }
            Gguf::parse(&w.to_bytes().unwrap()).unwrap()
        };
        assert_eq!(Pooling::from_gguf(&header(None)), None);
        assert_eq!(
            Pooling::from_gguf(&header(Some(MetaValue::U32(3)))),
            Some(Pooling::Last)
        );
        assert_eq!(
            Pooling::from_gguf(&header(Some(MetaValue::I32(1)))),
            Some(Pooling::Mean)
        );
        assert_eq!(Pooling::from_gguf(&header(Some(MetaValue::U32(0)))), None);

        let dir = std::env::temp_dir().join(format!("pocketrt-pooling-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        let folder = || Pooling::of_sentence_transformers(&dir);
        assert_eq!(folder().unwrap(), None);
        let file = dir.join("1_Pooling/config.json");
        std::fs::write(
            &file,
            r#"{"pooling_mode_cls_token": false, "pooling_mode_lasttoken": true}"#,
        )
        .unwrap();
        assert_eq!(folder().unwrap(), Some(Pooling::Last));
        std::fs::write(&file, r#"{"pooling_mode_mean_tokens": true}"#).unwrap();
        assert_eq!(folder().unwrap(), Some(Pooling::Mean));
        std::fs::write(&file, "{").unwrap();
        assert!(matches!(folder(), Err(Error::CorruptModel { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
