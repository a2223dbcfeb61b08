//! Stop strings (`stop`): generation ends at the first occurrence of any of them, which may
//! span token boundaries. Text that could be the start of a stop string is held back until
//! the next tokens decide; the stop string itself and everything after it are never
//! released.

use super::scan::{find_first, partial_suffix};

/// The stop-string filter over the raw generated text.
#[derive(Clone, Debug, Default)]
pub struct StopFilter {
    stops: Vec<String>,
    held: String,
    matched: bool,
    /// Bytes of generated text released so far.
    released: usize,
}

impl StopFilter {
    pub fn new(stops: Vec<String>) -> StopFilter {
        StopFilter {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            ..StopFilter::default()
        }
    }

    /// Take the next piece of generated text; returns what may be released now.
    pub fn push(&mut self, text: &str) -> String {
        if self.matched {
            return String::new();
        }
        self.held.push_str(text);
        let out = if let Some((at, _)) = find_first(&self.held, &self.stops) {
            self.matched = true;
            self.held.truncate(at);
            std::mem::take(&mut self.held)
        } else {
            let keep = partial_suffix(&self.held, &self.stops);
            let rest = self.held.split_off(self.held.len() - keep);
            std::mem::replace(&mut self.held, rest)
        };
        self.released += out.len();
        out
    }

    /// A stop string was generated: stop the generation.
    pub fn matched(&self) -> bool {
        self.matched
    }

    /// Bytes of generated text released so far (the stop string's start, once matched).
    pub fn released(&self) -> usize {
        self.released
    }

    /// The generation ended: release what was held (it turned out not to be a stop).
    pub fn finish(&mut self) -> String {
        let out = std::mem::take(&mut self.held);
        self.released += out.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stream `pieces` through a filter; (released text, matched).
    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut f = StopFilter::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let r = f.push(p);
            // Nothing released may contain the start of a stop that later completes.
            out.push_str(&r);
            if f.matched() {
                break;
            }
        }
        if !f.matched() {
            out.push_str(&f.finish());
        }
        assert_eq!(f.released(), out.len());
        (out, f.matched())
    }

    #[test]
    fn a_stop_string_in_one_token_ends_the_text_before_it() {
        assert_eq!(
            run(&["STOP"], &["Hello ", "STOP", " more"]),
            ("Hello ".into(), true)
        );
        assert_eq!(run(&["STOP"], &["Hi STOP there"]), ("Hi ".into(), true));
    }

    #[test]
    fn a_stop_string_split_over_two_and_three_tokens_never_leaks() {
        assert_eq!(
            run(&["STOP"], &["Hello ST", "OP more"]),
            ("Hello ".into(), true)
        );
        assert_eq!(
            run(&["STOP"], &["Hello S", "TO", "P!"]),
            ("Hello ".into(), true)
        );
        // Streamed piece by piece, no released piece holds any of the stop's letters.
        let mut f = StopFilter::new(vec!["\n\nUser:".into()]);
        let mut released = vec![];
        for p in ["Sure.", "\n", "\nUs", "er:", " next"] {
            released.push(f.push(p));
        }
        assert_eq!(released, ["Sure.", "", "", "", ""]);
        assert!(f.matched());
    }

    #[test]
    fn held_text_that_turns_out_not_to_be_a_stop_is_released() {
        let mut f = StopFilter::new(vec!["STOP".into()]);
        assert_eq!(f.push("a ST"), "a ");
        assert_eq!(f.push("ORM"), "STORM");
        assert_eq!(f.push(" ST"), " ");
        assert_eq!(f.finish(), "ST");
        assert!(!f.matched());
    }

    #[test]
    fn the_earliest_of_several_stops_wins_and_empty_stops_are_ignored() {
        assert_eq!(
            run(&["", "END", "b"], &["a", "b", "END"]),
            ("a".into(), true)
        );
        assert_eq!(
            run(&["END", "xyz"], &["1 x", "y END"]),
            ("1 xy ".into(), true)
        );
        assert_eq!(run(&[], &["no stops"]), ("no stops".into(), false));
    }

    #[test]
    fn multibyte_stops_and_text_split_mid_stop() {
        assert_eq!(run(&["。"], &["好", "。再见"]), ("好".into(), true));
        assert_eq!(run(&["é!"], &["caf", "é", "!"]), ("caf".into(), true));
    }
}
