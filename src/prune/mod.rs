//! Dependency-aware vocabulary pruning: `pocketrt convert --prune-vocab CORPUS --vocab-size N`.
//!
//! The model's tokenizer encodes a corpus; the N kept tokens are the byte tokens, every
//! added/special token and the model's special ids, then the tokens the corpus uses (most
//! used first), then unused tokens in merge-rank order — always together with their BPE
//! merge parents ([`crate::tokenizer::TokenOrigin`]), so every kept token stays producible
//! and text made only of kept tokens encodes exactly as before. Ids are renumbered in their
//! old order; the embedding (and an untied head) keep the kept rows ([`VocabCut`]); the
//! package gets the pruned tokenizer.json and config. Byte tokens are always kept, so every
//! text still encodes and decodes back exactly.

pub mod corpus;
mod select;

pub use corpus::Corpus;
pub use select::{select, Selection};

use crate::config::ModelConfig;
use crate::convert::{
    convert_with_cut, package_bytes, ConvertOptions, ConvertReport, Progress, VocabCut,
};
use crate::error::{Error, Result};
use crate::format::ModelSource;
use crate::tokenizer::{TokenOrigin, Tokenizer};
use std::path::Path;

/// A pruned vocabulary: what is kept, the pruned tokenizer and config, and what it costs.
pub struct VocabPlan {
    pub selection: Selection,
    pub tokenizer: Tokenizer,
    pub config: ModelConfig,
    /// New ids of kept merged tokens whose own text does not encode to them (the
    /// pre-tokenizer cuts it or the normalizer changes it): they are produced only inside
    /// longer text, as before pruning. Kept because the corpus uses them or a kept token
    /// needs them as merge parents.
    pub context_only: Vec<u32>,
    pub corpus_tokens_before: u64,
    pub corpus_tokens_after: u64,
}

/// Chooses the `n` kept tokens of `tok` (the tokenizer of a model with `config`) from the
/// tokens `corpus` uses, and builds the pruned tokenizer and config.
pub fn plan(tok: &Tokenizer, config: &ModelConfig, corpus: &Corpus, n: usize) -> Result<VocabPlan> {
    corpus.check_not_empty()?;
    let old = config.vocab_size.min(tok.vocab_size());
    if n >= old {
        return Err(Error::InvalidArgument(format!(
            "--vocab-size {n} is not below the model's vocabulary of {old} tokens: nothing \
             to prune"
        )));
    }
    let origins = tok.token_origins();
    let (counts, corpus_tokens_before) = corpus.count_tokens(tok);
    let required: Vec<u32> = config
        .bos_token_id
        .iter()
        .chain(&config.eos_token_ids)
        .chain(config.pad_token_id.iter())
        .copied()
        .collect();
    let selection = select(&origins, &counts, &required, n, &mut |id| {
        tok.encodes_to_itself(id)
    })?;
    let kept = &selection.kept;
    if let Some(&last) = kept.last().filter(|&&id| id as usize >= config.vocab_size) {
        return Err(Error::InvalidArgument(format!(
            "token id {last} is past the model's {} embedding rows",
            config.vocab_size
        )));
    }
    let pruned = tok.retain(kept)?;
    let new_id = |id: u32| -> Result<u32> {
        kept.binary_search(&id)
            .map(|i| i as u32)
            .map_err(|_| Error::InvalidArgument(format!("special token id {id} was not kept")))
    };
    let mut cfg = config.clone();
    cfg.vocab_size = kept.len();
    cfg.bos_token_id = config.bos_token_id.map(new_id).transpose()?;
    cfg.eos_token_ids = config
        .eos_token_ids
        .iter()
        .map(|&id| new_id(id))
        .collect::<Result<_>>()?;
    cfg.pad_token_id = config.pad_token_id.map(new_id).transpose()?;
    let context_only = (0..kept.len() as u32)
        .filter(|&new| {
            let origin = origins[kept[new as usize] as usize];
            matches!(origin, TokenOrigin::Merged { .. } | TokenOrigin::WholeWord)
                && !pruned.encodes_to_itself(new)
        })
        .collect();
    let corpus_tokens_after = corpus.token_total(&pruned);
    Ok(VocabPlan {
        selection,
        tokenizer: pruned,
        config: cfg,
        context_only,
        corpus_tokens_before,
        corpus_tokens_after,
    })
}

/// What pruning did, for printing.
#[derive(Clone, Debug)]
pub struct PruneReport {
    /// Embedding rows before / after.
    pub old_vocab: usize,
    pub new_vocab: usize,
    /// Tokens the original tokenizer defines (may be fewer than the embedding rows).
    pub old_tokenizer_tokens: usize,
    /// Bytes of the package without pruning (computed from the layout) and with it.
    pub package_bytes_before: u64,
    pub package_bytes_after: u64,
    pub corpus_files: usize,
    pub corpus_files_skipped: usize,
    pub corpus_bytes: usize,
    pub corpus_tokens_before: u64,
    pub corpus_tokens_after: u64,
    pub selection: Selection,
    /// See [`VocabPlan::context_only`] (new ids).
    pub context_only: Vec<u32>,
}

impl PruneReport {
    /// Growth of the corpus token count, in percent.
    pub fn compression_loss_percent(&self) -> f64 {
        let before = self.corpus_tokens_before.max(1) as f64;
        (self.corpus_tokens_after as f64 - before) / before * 100.0
    }
}

impl std::fmt::Display for PruneReport {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let s = &self.selection;
        let mb = |b: u64| b as f64 / 1e6;
        writeln!(
            f,
            "vocabulary:      {} -> {} tokens ({} defined by the tokenizer)",
            self.old_vocab, self.new_vocab, self.old_tokenizer_tokens
        )?;
        writeln!(
            f,
            "package bytes:   {} -> {} ({:.1} MB -> {:.1} MB, -{:.1} MB)",
            self.package_bytes_before,
            self.package_bytes_after,
            mb(self.package_bytes_before),
            mb(self.package_bytes_after),
            mb(self
                .package_bytes_before
                .saturating_sub(self.package_bytes_after))
        )?;
        writeln!(
            f,
            "corpus:          {} files ({} non-UTF-8 skipped), {} bytes",
            self.corpus_files, self.corpus_files_skipped, self.corpus_bytes
        )?;
        writeln!(
            f,
            "corpus tokens:   {} -> {} ({:+.2}%)",
            self.corpus_tokens_before,
            self.corpus_tokens_after,
            self.compression_loss_percent()
        )?;
        writeln!(
            f,
            "kept tokens:     {} required (bytes, specials), {} used by the corpus, {} unused \
             but kept for closure, {} unused filling the budget by merge rank",
            s.required, s.used, s.closure_only, s.filler
        )?;
        write!(
            f,
            "not kept:        {} corpus tokens did not fit with their parents; {} kept tokens \
             are produced only inside longer text",
            s.dropped_used,
            self.context_only.len()
        )
    }
}

/// Converts `src` into a pocket package at `out` with its vocabulary pruned to `n` tokens
/// chosen on `corpus` (see the module docs).
pub fn convert_pruned(
    src: &mut dyn ModelSource,
    out: &Path,
    opts: &ConvertOptions,
    corpus: &Corpus,
    n: usize,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(ConvertReport, PruneReport)> {
    let json = src.tokenizer_json()?.ok_or_else(|| {
        Error::InvalidArgument(
            "the model has no tokenizer, so its vocabulary cannot be pruned".into(),
        )
    })?;
    let tok = Tokenizer::from_hf_json(&json)?;
    let config = src.config().clone();
    let plan = plan(&tok, &config, corpus, n)?;
    let pruned_json = plan.tokenizer.to_hf_json();
    let cut = VocabCut {
        rows: &plan.selection.kept,
        config: &plan.config,
        tokenizer_json: &pruned_json,
    };
    let report = convert_with_cut(src, out, opts, Some(&cut), progress)?;
    let prune = PruneReport {
        old_vocab: config.vocab_size,
        new_vocab: plan.config.vocab_size,
        old_tokenizer_tokens: tok.vocab_size(),
        package_bytes_before: package_bytes(&config)?,
        package_bytes_after: report.package_bytes,
        corpus_files: corpus.texts.len(),
        corpus_files_skipped: corpus.skipped.len(),
        corpus_bytes: corpus.bytes(),
        corpus_tokens_before: plan.corpus_tokens_before,
        corpus_tokens_after: plan.corpus_tokens_after,
        selection: plan.selection,
        context_only: plan.context_only,
    };
    Ok((report, prune))
}
