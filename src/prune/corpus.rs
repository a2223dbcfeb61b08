//! The text corpus that decides which tokens a pruned vocabulary keeps.

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};

/// Named texts, in a fixed order.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub texts: Vec<(String, String)>,
    /// Files found under a directory that are not UTF-8 text (left out).
    pub skipped: Vec<PathBuf>,
}

impl Corpus {
    pub fn from_texts(texts: Vec<(String, String)>) -> Corpus {
        Corpus {
            texts,
            skipped: Vec::new(),
        }
    }

    /// Reads each path: a file (it must be UTF-8 text) or a directory, whose files are read
    /// recursively in sorted order, files that are not UTF-8 text skipped (and listed).
    pub fn read(paths: &[PathBuf]) -> Result<Corpus> {
        let mut corpus = Corpus::default();
        for path in paths {
            if path.is_dir() {
                let mut files = Vec::new();
                list_files(path, &mut files)?;
                for f in files {
                    let bytes = std::fs::read(&f).map_err(|e| Error::io(&f, e))?;
                    match String::from_utf8(bytes) {
                        Ok(text) => corpus.texts.push((f.display().to_string(), text)),
                        Err(_) => corpus.skipped.push(f),
                    }
                }
            } else {
                let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
                let text = String::from_utf8(bytes).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "corpus file {} is not UTF-8 text: {e}",
                        path.display()
                    ))
                })?;
                corpus.texts.push((path.display().to_string(), text));
            }
        }
        Ok(corpus)
    }

    /// Total text bytes.
    pub fn bytes(&self) -> usize {
        self.texts.iter().map(|(_, t)| t.len()).sum()
    }

    /// An error when there is no text to count tokens on.
    pub fn check_not_empty(&self) -> Result<()> {
        if self.bytes() == 0 {
            return Err(Error::InvalidArgument(format!(
                "the pruning corpus is empty ({} text files, {} non-UTF-8 files skipped): \
                 --prune-vocab needs text the model will see",
                self.texts.len(),
                self.skipped.len()
            )));
        }
        Ok(())
    }

    /// How often `tok` emits each id on the corpus (indexed by id), and the total.
    pub fn count_tokens(&self, tok: &Tokenizer) -> (Vec<u64>, u64) {
        let mut counts = vec![0u64; tok.vocab_size()];
        let mut total = 0u64;
        for (_, text) in &self.texts {
            for id in tok.encode(text, false) {
                counts[id as usize] += 1;
                total += 1;
            }
        }
        (counts, total)
    }

    /// The number of tokens `tok` encodes the corpus into.
    pub fn token_total(&self, tok: &Tokenizer) -> u64 {
        self.texts
            .iter()
            .map(|(_, t)| tok.encode(t, false).len() as u64)
            .sum()
    }
}

/// Regular files under `dir`, recursively, in sorted path order (symlinks followed).
fn list_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|e| Error::io(dir, e)))
        .collect::<Result<_>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            list_files(&p, out)?;
        } else if p.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_read_sorted_and_recursively_skipping_binary_files() {
        let dir = std::env::temp_dir().join(format!("pocketrt-corpus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("b.txt"), "bee").unwrap();
        std::fs::write(dir.join("a.txt"), "ay").unwrap();
        std::fs::write(dir.join("sub/c.txt"), "sea").unwrap();
        std::fs::write(dir.join("x.bin"), [0xff, 0xfe, 0x00]).unwrap();
        let c = Corpus::read(std::slice::from_ref(&dir)).unwrap();
        let texts: Vec<&str> = c.texts.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["ay", "bee", "sea"]);
        assert_eq!(c.skipped, vec![dir.join("x.bin")]);
        // A named binary file is an error; an empty corpus fails its check.
        assert!(Corpus::read(&[dir.join("x.bin")]).is_err());
        std::fs::write(dir.join("empty.txt"), "").unwrap();
        let e = Corpus::read(&[dir.join("empty.txt")])
            .unwrap()
            .check_not_empty()
            .unwrap_err();
        assert!(e.to_string().contains("corpus is empty"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
