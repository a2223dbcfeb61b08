//! The one search the streaming filters share: where a tag starts in text that is still
//! arriving, and how much of the end must be held back because it could be the start of
//! one (a stop string or `</think>` split over two or three tokens).

/// The length of the longest end of `text` that is a proper prefix of one of `tags`
/// (the part that cannot be released until the next piece decides it). Always ends on a
/// character boundary.
pub fn partial_suffix<S: AsRef<str>>(text: &str, tags: &[S]) -> usize {
    let mut longest = 0;
    for tag in tags {
        let tag = tag.as_ref();
        let most = text.len().min(tag.len().saturating_sub(1));
        for n in (longest + 1..=most).rev() {
            let start = text.len() - n;
            if text.is_char_boundary(start) && tag.starts_with(&text[start..]) {
                longest = n;
                break;
            }
        }
    }
    longest
}

/// The earliest complete occurrence of any of `tags` in `text`: (start, tag length).
pub fn find_first<S: AsRef<str>>(text: &str, tags: &[S]) -> Option<(usize, usize)> {
    tags.iter()
        .filter_map(|t| text.find(t.as_ref()).map(|i| (i, t.as_ref().len())))
        .min()
}

/// Split `held` at the first complete `tag`: `Ok((before, after))`, or `Err(release)`:
/// no tag yet, and the text that can safely be released now (the rest stays in `held`).
pub fn take_until(held: &mut String, tag: &str) -> Result<(String, String), String> {
    if let Some(i) = held.find(tag) {
        let after = held[i + tag.len()..].to_string();
        held.truncate(i);
        return Ok((std::mem::take(held), after));
    }
    let keep = partial_suffix(held, &[tag]);
    let rest = held.split_off(held.len() - keep);
    Err(std::mem::replace(held, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_suffix_is_the_longest_proper_prefix_of_a_tag_at_the_end() {
        assert_eq!(partial_suffix("abc</th", &["</think>"]), 4);
        assert_eq!(partial_suffix("abc<", &["</think>"]), 1);
        assert_eq!(partial_suffix("abc", &["</think>"]), 0);
        // A whole tag is not partial (find_first reports it).
        assert_eq!(partial_suffix("x</think>", &["</think>"]), 0);
        assert_eq!(partial_suffix("xSTO", &["STOP", "TOPS", "O"]), 3);
        assert_eq!(partial_suffix("é", &["éa"]), 2);
    }

    #[test]
    fn take_until_splits_at_the_tag_or_releases_what_cannot_start_one() {
        let mut held = String::from("think more</th");
        assert_eq!(take_until(&mut held, "</think>"), Err("think more".into()));
        assert_eq!(held, "</th");
        held.push_str("ink>\n\nanswer");
        assert_eq!(
            take_until(&mut held, "</think>"),
            Ok((String::new(), "\n\nanswer".into()))
        );
        assert_eq!(find_first("a STOP b END", &["END", "STOP"]), Some((2, 4)));
    }
}
