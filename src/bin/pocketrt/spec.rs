//! `--spec lookup|MODEL` and `--draft-max N` (`run`, `chat`, `serve`, `bench`): speculative
//! decoding ([`pocketrt::speculate`]), the same text with several tokens per step. A
//! draft model is loaded like the model (same backend, weights and memory budget; the
//! model's context) and must share its tokenizer.

use crate::run::{load, open_model, ModelArgs};
use pocketrt::generate::{GenerateStats, Session};
use pocketrt::speculate::{DraftModel, SpecOptions, DEFAULT_DRAFT_MAX};
use pocketrt::{Error, Result};

#[derive(clap::Args)]
pub struct SpecArgs {
    /// Speculative decoding (the same text, several tokens per step): `lookup` drafts the
    /// continuation of text the context repeats (code edits, quotes); MODEL (a GGUF file,
    /// package or hub id of a smaller model with the same tokenizer) drafts with that
    /// model, on the same backend, where lookup finds nothing.
    #[arg(long, value_name = "lookup|MODEL")]
    pub spec: Option<String>,
    /// Most drafts per step with --spec (how many adapts to what is accepted; 1 to 32).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DRAFT_MAX, requires = "spec")]
    pub draft_max: usize,
}

impl SpecArgs {
    /// The drafts these flags ask for (`None`: no --spec), checked.
    pub fn options(&self) -> Result<Option<SpecOptions>> {
        let Some(spec) = &self.spec else {
            return Ok(None);
        };
        let opts = match spec.as_str() {
            "lookup" => SpecOptions::lookup(),
            _ => SpecOptions::with_draft_model(),
        };
        let opts = SpecOptions {
            draft_max: self.draft_max,
            ..opts
        };
        if let Err(Error::InvalidArgument(why)) = opts.validate() {
            return Err(Error::InvalidArgument(format!("--draft-max: {why}")));
        }
        Ok(Some(opts))
    }

    /// [`SpecArgs::options`]; with `--spec MODEL` the draft model is loaded as `a` loads
    /// the model (at `session`'s context) and given to `session`. A draft model of
    /// another vocabulary is an error.
    pub fn load(&self, a: &ModelArgs, session: &mut Session) -> Result<Option<SpecOptions>> {
        let opts = self.options()?;
        let (Some(spec), Some(true)) = (&self.spec, opts.map(|o| o.draft_model)) else {
            return Ok(opts);
        };
        let mut draft = open_model(spec)?;
        let engine = load(a, &mut draft, Some(session.engine().context()))?;
        let model = DraftModel::new(engine, draft.tokenizer(), session.tokenizer()).map_err(
            |e| match e {
                Error::InvalidArgument(why) => {
                    Error::InvalidArgument(format!("--spec {spec}: {why}"))
                }
                e => e,
            },
        )?;
        if a.verbose {
            let e = model.engine();
            eprintln!(
                "draft model: {spec} ({}; context {})",
                e.description(),
                e.context()
            );
        }
        session.set_draft(Some(model));
        Ok(opts)
    }
}

/// `-v`'s line on speculative decoding for a generation that `asked` for it (nothing
/// when it did not): its drafts, or why it had none.
pub fn print_stats(asked: Option<SpecOptions>, stats: &GenerateStats) {
    let Some(opts) = asked else {
        return;
    };
    let s = stats.speculation;
    if s.steps > 0 {
        eprintln!(
            "speculative: {} drafted, {} accepted in {} steps ({:.1} accepted/step)",
            s.drafted,
            s.accepted,
            s.steps,
            s.accepted_per_step()
        );
        return;
    }
    let why = if stats.generated_tokens <= 1 {
        "the reply ended at its first token"
    } else if opts.draft_model {
        "the context had no room for drafts"
    } else {
        "lookup drafts only what the context repeats, and no n-gram of it did"
    };
    eprintln!("speculative: on, but nothing was drafted: {why}");
}
