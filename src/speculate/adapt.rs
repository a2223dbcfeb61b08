//! How many tokens to draft: grown while drafts are accepted, cut back when they are not,
//! and paused after steps whose drafts all failed (each rejected draft costs a row of the
//! verification step; where nothing repeats, drafting stops paying).

/// The adaptive draft length.
#[derive(Clone, Debug)]
pub struct DraftLength {
    k: usize,
    max: usize,
    /// Steps left without drafts.
    pause: usize,
    /// The pause after the next all-rejected step (doubles while they follow each other).
    backoff: usize,
}

/// Longest pause, in steps, after drafts that all failed.
const PAUSE_MAX: usize = 32;

impl DraftLength {
    /// Starting at half of `max` (at least 1).
    pub fn new(max: usize) -> DraftLength {
        DraftLength {
            k: max.div_ceil(2).max(1),
            max,
            pause: 0,
            backoff: 1,
        }
    }

    /// Drafts to make at this step (0 while paused).
    pub fn for_step(&mut self) -> usize {
        if self.pause > 0 {
            self.pause -= 1;
            return 0;
        }
        self.k
    }

    /// After a step that verified `drafted` (> 0) drafts and kept the first `accepted`.
    pub fn observe(&mut self, drafted: usize, accepted: usize) {
        if accepted == drafted {
            self.k = (self.k * 2).min(self.max);
            self.backoff = 1;
        } else if accepted == 0 {
            self.k = (self.k / 2).max(1);
            self.pause = self.backoff;
            self.backoff = (self.backoff * 2).min(PAUSE_MAX);
        } else {
            self.k = (accepted + 1).min(self.max);
            self.backoff = 1;
        }
    }
}
