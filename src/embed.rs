//! Embeddings: one vector per input text, as llama.cpp's `--embedding` makes them.
//!
//! The model runs the input's tokens from position 0 (its own sequence, not the
//! conversation's); each token's final hidden state **after the output norm** (the
//! vector the LM head would read) is kept, the rows are pooled into one ([`Pooling`]:
//! the last token's, the mean, or the first token's), then L2-normalised. `dimensions`
//! (OpenAI's Matryoshka truncation) keeps the first N values and normalises again.
//!
//! The backends only produce the normed hidden rows ([`crate::engine::Engine::embed`]);
//! pooling and normalisation are here, once, for every front end (native, the browser,
//! the server).

use crate::error::{Error, Result};

pub use crate::format::Pooling;

/// The model's own pooling, found by opening it here: a method of [`Pooling`] kept above
/// `crate::format`, since it needs the reader that opens any model path.
impl Pooling {
    /// The pooling the model at `path` declares ([`crate::format::ModelSource::pooling`]:
    /// GGUF metadata, a sentence-transformers folder, a package's manifest).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn of_model(path: &std::path::Path) -> Result<Option<Pooling>> {
        Ok(crate::format::open(path)?.pooling())
    }
}

/// What an embedding request may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbedOptions {
    /// The pooling; `None`: the model's ([`crate::generate::Session::pooling`]), else
    /// [`Pooling::Last`].
    pub pooling: Option<Pooling>,
    /// L2-normalise the vector (true by default, as OpenAI's and llama.cpp's are).
    pub normalize: bool,
    /// Keep the first N values (then normalise again): OpenAI's `dimensions`. At least 1
    /// and at most the model's hidden size.
    pub dimensions: Option<usize>,
}

impl Default for EmbedOptions {
    fn default() -> EmbedOptions {
        EmbedOptions {
            pooling: None,
            normalize: true,
            dimensions: None,
        }
    }
}

/// What to embed: a text (tokenized with the model's special tokens, as llama.cpp does)
/// or tokens.
#[derive(Clone, Copy, Debug)]
pub enum EmbedInput<'a> {
    Text(&'a str),
    Tokens(&'a [u32]),
}

impl<'a> From<&'a str> for EmbedInput<'a> {
    fn from(text: &'a str) -> EmbedInput<'a> {
        EmbedInput::Text(text)
    }
}

impl<'a> From<&'a [u32]> for EmbedInput<'a> {
    fn from(tokens: &'a [u32]) -> EmbedInput<'a> {
        EmbedInput::Tokens(tokens)
    }
}

/// One input's embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub vector: Vec<f32>,
    /// Tokens the input had (OpenAI's `usage.prompt_tokens` counts them).
    pub tokens: usize,
}

/// Check `tokens` for an embedding on a `context`-position model of `hidden` values:
/// not empty, within the context, and `dimensions` within `1..=hidden`.
pub fn check(tokens: &[u32], context: usize, hidden: usize, opts: &EmbedOptions) -> Result<()> {
    check_tokens(tokens, context)?;
    check_dimensions(opts.dimensions, hidden)
}

/// `tokens` not empty and within a `context`-position model's context.
pub fn check_tokens(tokens: &[u32], context: usize) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::InvalidArgument(
            "the input to embed is empty (no tokens)".into(),
        ));
    }
    if tokens.len() > context {
        return Err(Error::ContextTooLong {
            position: tokens.len(),
            context,
        });
    }
    Ok(())
}

/// `dimensions` within `1..=hidden`.
pub fn check_dimensions(dimensions: Option<usize>, hidden: usize) -> Result<()> {
    match dimensions {
        Some(n) if n == 0 || n > hidden => Err(Error::InvalidArgument(format!(
            "dimensions {n} is outside 1..={hidden} (the model's embedding size)"
        ))),
        _ => Ok(()),
    }
}

/// The rows of `count` tokens (`hidden`: the normed final hidden states, `[token][width]`)
/// pooled into one vector.
pub fn pool(hidden: &[f32], width: usize, pooling: Pooling) -> Vec<f32> {
    let rows = hidden.chunks_exact(width);
    match pooling {
        Pooling::Last => rows.last().map(<[f32]>::to_vec).unwrap_or_default(),
        Pooling::Cls => rows.take(1).flatten().copied().collect(),
        Pooling::Mean => {
            let n = hidden.len() / width.max(1);
            let mut sum = vec![0.0f64; width];
            for row in rows {
                for (s, &x) in sum.iter_mut().zip(row) {
                    *s += x as f64;
                }
            }
            sum.iter().map(|&s| (s / n.max(1) as f64) as f32).collect()
        }
    }
}

/// `v / ‖v‖₂` (in f64; a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x = (*x as f64 / norm) as f32;
        }
    }
}

/// The pooled vector made what `opts` asks: normalised, truncated to `dimensions` and
/// normalised again (a truncated unit vector is not one).
pub fn finish(mut v: Vec<f32>, opts: &EmbedOptions) -> Vec<f32> {
    if let Some(n) = opts.dimensions {
        v.truncate(n);
    }
    if opts.normalize {
        l2_normalize(&mut v);
    }
    v
}

/// The embedding of `tokens` tokens from their normed hidden `rows` (`[token][hidden]`):
/// pooled by `pooling` (a request's, else the model's, else last), then finished as
/// `opts` asks. Shared by `Session::embed` and the browser's session.
pub fn from_rows(
    rows: &[f32],
    hidden: usize,
    model_pooling: Option<Pooling>,
    opts: &EmbedOptions,
) -> Embedding {
    let pooling = opts.pooling.or(model_pooling).unwrap_or_default();
    Embedding {
        vector: finish(pool(rows, hidden, pooling), opts),
        tokens: rows.len() / hidden.max(1),
    }
}

/// Cosine similarity of two vectors (f64), for tests and comparisons.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb).max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_reads_the_rows_it_names() {
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(pool(&rows, 2, Pooling::Last), vec![5.0, 6.0]);
        assert_eq!(pool(&rows, 2, Pooling::Cls), vec![1.0, 2.0]);
        assert_eq!(pool(&rows, 2, Pooling::Mean), vec![3.0, 4.0]);
    }

    /// A model file's pooling as `of_model` reads it, and kept by `convert` in the
    /// package's manifest (read back by the package source and the browser's stream);
    /// a manifest without the field (older packages) says nothing.
    #[test]
    fn a_gguf_s_pooling_type_is_kept_in_its_package() {
        use crate::convert::{convert, ConvertOptions};
        use crate::format::gguf::MetaValue;
        use crate::format::package::Manifest;
        let dir = std::env::temp_dir().join(format!("pocketrt-pooling-pkg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let synth = crate::synth::SynthSource::preset("tiny-qwen3", 3).unwrap();
        let gguf = dir.join("model.gguf");
        let mut w = synth.gguf_writer().unwrap();
        w.meta("qwen3.pooling_type", MetaValue::U32(2));
        std::fs::write(&gguf, w.to_bytes().unwrap()).unwrap();
        assert_eq!(Pooling::of_model(&gguf).unwrap(), Some(Pooling::Cls));

        let package = dir.join("package");
        let mut src = crate::format::open(&gguf).unwrap();
        let report = convert(
            src.as_mut(),
            &package,
            &ConvertOptions::default(),
            &mut |_| {},
        );
        let manifest = report.unwrap().manifest;
        assert_eq!(manifest.pooling, Some(Pooling::Cls));
        let json: serde_json::Value = serde_json::from_str(&manifest.to_json().unwrap()).unwrap();
        assert_eq!(json["pooling"], "cls");
        assert_eq!(Pooling::of_model(&package).unwrap(), Some(Pooling::Cls));
        let streamed = crate::cpu::fast::StreamedTensors::new(&manifest).unwrap();
        assert_eq!(
            crate::format::ModelSource::pooling(&streamed),
            Some(Pooling::Cls)
        );

        let older = Manifest {
            pooling: None,
            ..manifest
        };
        let json = older.to_json().unwrap();
        assert!(
            !json.contains("pooling"),
            "absent, as older packages wrote it"
        );
        assert_eq!(Manifest::from_json(&json).unwrap().pooling, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn finish_normalises_and_truncates_then_normalises_again() {
        let opts = EmbedOptions::default();
        let v = finish(vec![3.0, 4.0, 0.0], &opts);
        assert_eq!(v, vec![0.6, 0.8, 0.0]);
        let two = EmbedOptions {
            dimensions: Some(1),
            ..opts
        };
        assert_eq!(finish(vec![3.0, 4.0], &two), vec![1.0]);
        let raw = EmbedOptions {
            normalize: false,
            ..opts
        };
        assert_eq!(finish(vec![3.0, 4.0], &raw), vec![3.0, 4.0]);
        assert_eq!(finish(vec![0.0, 0.0], &opts), vec![0.0, 0.0]);
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let opts = EmbedOptions::default();
        assert!(matches!(
            check(&[], 8, 4, &opts),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            check(&[1; 9], 8, 4, &opts),
            Err(Error::ContextTooLong {
                position: 9,
                context: 8
            })
        ));
        for n in [0, 5] {
            let o = EmbedOptions {
                dimensions: Some(n),
                ..opts
            };
            assert!(matches!(
                check(&[1], 8, 4, &o),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(check(&[1; 8], 8, 4, &opts).is_ok());
    }
}
