//! pocketrt's `speculative` request field (speculative decoding, [`crate::speculate`]):
//! checked when the request is, and resolved against the default of whatever runs it
//! (the server's `--spec`, the CLI's, the browser's load option) by
//! [`RunCore::apply_speculation`](super::RunCore::apply_speculation).

use super::error::ApiError;
use super::types::Speculative;
use crate::speculate::{SpecOptions, DRAFT_MAX_LIMIT};

/// What a request asked of speculative decoding, checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SpecChoice {
    /// Nothing said: the front end's default.
    #[default]
    Default,
    /// `false`.
    Off,
    /// `true` (no `n_max`) or `{"n_max": N}`.
    On { n_max: Option<usize> },
}

/// Check `speculative` (`n_max` in 1..=[`DRAFT_MAX_LIMIT`]).
pub(crate) fn check(field: Option<Speculative>) -> Result<SpecChoice, ApiError> {
    Ok(match field {
        None => SpecChoice::Default,
        Some(Speculative::Switch(false)) => SpecChoice::Off,
        Some(Speculative::Switch(true)) => SpecChoice::On { n_max: None },
        Some(Speculative::Options(o)) => match o.n_max {
            None => SpecChoice::On { n_max: None },
            Some(n) if (1..=DRAFT_MAX_LIMIT as i64).contains(&n) => SpecChoice::On {
                n_max: Some(n as usize),
            },
            Some(n) => {
                return Err(ApiError::invalid(
                    "speculative.n_max",
                    format!(
                        "{n} is out of range for 'speculative.n_max': it must be 1 to \
                         {DRAFT_MAX_LIMIT} drafts per step"
                    ),
                ))
            }
        },
    })
}

impl SpecChoice {
    /// The drafts a generation makes, given the front end's `default` (`None`: it does
    /// not speculate unless asked): absent → the default; `false` → none; `true` → the
    /// default's drafts, or lookup's where it has none; `n_max` caps the drafts per step.
    pub(crate) fn resolve(self, default: Option<SpecOptions>) -> Option<SpecOptions> {
        match self {
            SpecChoice::Default => default,
            SpecChoice::Off => None,
            SpecChoice::On { n_max } => {
                let mut opts = default.unwrap_or_else(SpecOptions::lookup);
                if let Some(n) = n_max {
                    opts.draft_max = n;
                }
                Some(opts)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SpeculativeOptions;

    #[test]
    fn the_request_s_choice_resolves_against_the_default() {
        let model = SpecOptions {
            draft_max: 4,
            ..SpecOptions::with_draft_model()
        };
        let on = |n_max| Some(Speculative::Options(SpeculativeOptions { n_max }));
        let cases = [
            (None, None, None),
            (None, Some(model), Some(model)),
            (Some(Speculative::Switch(false)), Some(model), None),
            (
                Some(Speculative::Switch(true)),
                None,
                Some(SpecOptions::lookup()),
            ),
            (Some(Speculative::Switch(true)), Some(model), Some(model)),
            (
                on(Some(3)),
                None,
                Some(SpecOptions {
                    draft_max: 3,
                    ..SpecOptions::lookup()
                }),
            ),
            (
                on(Some(32)),
                Some(model),
                Some(SpecOptions {
                    draft_max: 32,
                    ..model
                }),
            ),
            (on(None), Some(model), Some(model)),
        ];
        for (field, default, want) in cases {
            let got = check(field).unwrap().resolve(default);
            assert_eq!(got, want, "{field:?} with {default:?}");
        }
        for bad in [0, -1, 33] {
            let e = check(on(Some(bad))).unwrap_err();
            assert_eq!(e.error.param.as_deref(), Some("speculative.n_max"), "{e}");
            assert_eq!(e.error.kind, "invalid_request_error");
        }
    }
}
