//! Where the fast backend keeps its matrices. Decode streams every code and param word
//! from memory once per token, so how that memory is mapped matters: with 4 KiB pages a
//! pass over the Pocket model's 170 MB is ~42,000 TLB misses and the hardware prefetchers
//! stop at each page's edge. On Linux (and Android) the matrices are therefore copied into
//! one allocation advised as transparent huge pages (`madvise(MADV_HUGEPAGE)`, before any
//! of it is written, so the first touch maps 2 MiB pages). Elsewhere (macOS has no
//! transparent huge pages, wasm no pages at all) each tensor's own buffers are kept: no
//! copy, so a browser tab's peak memory stays one model.

use super::kernel::Rows;
use super::packed::{dequantize_row_in, Format, Packed};
use crate::quant::GROUP;

/// Bytes of tensors copied between two returns of freed memory to the system.
const RELEASE_BYTES: usize = 16 << 20;

/// A run of words in one of [`WeightMemory`]'s parts.
#[derive(Clone, Copy, Debug)]
struct Span {
    part: usize,
    start: usize,
    len: usize,
}

/// A matrix held by a [`WeightMemory`] (`rows × cols`, in `format`'s layout).
#[derive(Clone, Copy, Debug)]
pub struct Matrix {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    codes: Span,
    params: Span,
}

/// Every matrix of a model: their code and param words in `parts` (on Linux one part,
/// huge-page advised; elsewhere each tensor's two buffers as they came).
pub struct WeightMemory {
    parts: Vec<Vec<u32>>,
    /// Bytes of `parts` whose mapping was advised as huge pages.
    advised: usize,
}

impl WeightMemory {
    /// Take over `tensors`, returning each one's [`Matrix`] in order.
    pub fn new(tensors: Vec<Packed>) -> (WeightMemory, Vec<Matrix>) {
        if cfg!(any(target_os = "linux", target_os = "android")) {
            Self::packed(tensors)
        } else {
            Self::kept(tensors)
        }
    }

    /// Each tensor's buffers kept as parts (no copy).
    fn kept(tensors: Vec<Packed>) -> (WeightMemory, Vec<Matrix>) {
        let mut parts = Vec::with_capacity(2 * tensors.len());
        let mut span = |words: Vec<u32>| {
            let len = words.len();
            parts.push(words);
            Span {
                part: parts.len() - 1,
                start: 0,
                len,
            }
        };
        let matrices = tensors
            .into_iter()
            .map(|t| Matrix {
                format: t.format,
                rows: t.rows,
                cols: t.cols,
                codes: span(t.codes),
                params: span(t.params),
            })
            .collect();
        (WeightMemory { parts, advised: 0 }, matrices)
    }

    /// Every tensor copied into one huge-page advised allocation, in order (each tensor's
    /// codes, then its params, each run starting on a cache line), the originals freed as
    /// they are copied.
    fn packed(tensors: Vec<Packed>) -> (WeightMemory, Vec<Matrix>) {
        let words: usize = tensors
            .iter()
            .map(|t| line_up(t.codes.len()) + line_up(t.params.len()))
            .sum();
        let (mut all, advised) = huge::vec(words);
        // `all` starts with zeros up to its first huge page: runs line up from there.
        let (base, at) = (all.len(), all.as_ptr());
        let mut span = |words: &[u32]| {
            all.resize(base + line_up(all.len() - base), 0);
            let start = all.len();
            all.extend_from_slice(words);
            Span {
                part: 0,
                start,
                len: words.len(),
            }
        };
        let mut unreleased = 0;
        let matrices = tensors
            .into_iter()
            .map(|t| {
                let m = Matrix {
                    format: t.format,
                    rows: t.rows,
                    cols: t.cols,
                    codes: span(&t.codes),
                    params: span(&t.params),
                };
                unreleased += 4 * (t.codes.len() + t.params.len());
                drop(t);
                // Freed as it goes, so that the process never holds the model twice.
                if unreleased >= RELEASE_BYTES {
                    huge::release_freed();
                    unreleased = 0;
                }
                m
            })
            .collect();
        debug_assert_eq!(at, all.as_ptr(), "the advised allocation was kept");
        huge::release_freed();
        let parts = vec![all];
        (WeightMemory { parts, advised }, matrices)
    }

    /// The rows of `m`, for the kernels.
    pub fn rows(&self, m: &Matrix) -> Rows<'_> {
        Rows {
            format: m.format,
            codes: self.words(m.codes),
            params: self.words(m.params),
            groups: m.cols.div_ceil(GROUP),
            rows: m.rows,
        }
    }

    fn words(&self, s: Span) -> &[u32] {
        &self.parts[s.part][s.start..][..s.len]
    }

    /// Row `row` of `m` in f32 (an embedding lookup), as `Q4Tensor::dequantize_row` or
    /// `Q8Tensor::dequantize_row` gives it.
    pub fn dequantize_row(&self, m: &Matrix, row: usize, out: &mut [f32]) {
        assert!(row < m.rows, "row {row} of a {}-row matrix", m.rows);
        let words = (self.words(m.codes), self.words(m.params));
        dequantize_row_in(m.format, words, m.cols, row, out);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| 4 * p.len()).sum()
    }

    /// Bytes whose mapping was advised as transparent huge pages (0 where there are none,
    /// or the kernel refused the advice).
    pub fn huge_page_bytes(&self) -> usize {
        self.advised
    }
}

impl std::fmt::Debug for WeightMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightMemory")
            .field("parts", &self.parts.len())
            .field("bytes", &self.bytes())
            .field("huge_page_bytes", &self.advised)
            .finish()
    }
}

/// `words` rounded up to whole 64-byte cache lines.
fn line_up(words: usize) -> usize {
    words.next_multiple_of(16)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod huge {
    /// Bytes of a transparent huge page (x86-64 and arm64 with 4 KiB base pages).
    const HUGE_PAGE: usize = 2 << 20;

    /// A vector with room for `words` more words, the whole huge pages they fill (from its
    /// first `HUGE_PAGE`-aligned word on) advised as such before anything is written, and
    /// the bytes advised (0 when the kernel refused, or for less than one huge page). It holds
    /// zeros up to that first aligned word, so what is pushed next lands on huge pages.
    pub fn vec(words: usize) -> (Vec<u32>, usize) {
        let mut v = Vec::<u32>::with_capacity(words + HUGE_PAGE / 4);
        let addr = v.as_ptr() as usize;
        let lead = (addr.next_multiple_of(HUGE_PAGE) - addr) / 4;
        // The whole huge pages `words` fill (not the spare capacity, whose extent depends on
        // where the allocation lies): the same for every load of a model.
        let len = words * 4 / HUGE_PAGE * HUGE_PAGE;
        if len == 0 {
            return (v, 0);
        }
        // SAFETY: the range lies within the vector's allocation, which nothing reads or
        // writes yet; the advice changes how it is mapped, never its contents.
        let ok = unsafe {
            libc::madvise(v.as_mut_ptr().add(lead).cast(), len, libc::MADV_HUGEPAGE) == 0
        };
        v.resize(lead, 0);
        (v, if ok { len } else { 0 })
    }

    /// Give the pages of freed heap blocks back to the system: the tensors just copied
    /// were mostly ~1 MB blocks of the heap, which glibc keeps mapped after `free`
    /// (otherwise the process would hold the model twice).
    pub fn release_freed() {
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free memory to the system.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod huge {
    pub fn vec(words: usize) -> (Vec<u32>, usize) {
        (Vec::with_capacity(words), 0)
    }

    pub fn release_freed() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{Q4Tensor, Q8Tensor};
    use crate::synth::Rng;

    /// Tensors of `shapes` with random codes and params.
    fn tensors(shapes: &[(usize, usize)], seed: u64) -> Vec<Q4Tensor> {
        let mut rng = Rng::new(seed);
        let mut words = |n: usize| (0..n).map(|_| rng.next_u64() as u32).collect();
        shapes
            .iter()
            .map(|&(rows, cols)| Q4Tensor {
                rows,
                cols,
                codes: words(rows * cols / 8),
                // Finite (scale, min) pairs: both halves below 1.0 in f16.
                qparams: words(rows * cols / GROUP)
                    .into_iter()
                    .map(|w: u32| w & 0x3BFF_3BFF)
                    .collect(),
            })
            .collect()
    }

    /// Each way of holding them gives back every tensor's words and rows.
    #[test]
    fn matrices_read_back_their_tensors() {
        // 1 MiB, 0.44 MiB and 2.3 MiB of codes: the packed memory spans huge pages.
        let shapes = [(1024, 1024), (896, 1024), (2560, 960)];
        let want = tensors(&shapes, 5);
        for held in [WeightMemory::kept, WeightMemory::packed] {
            let (memory, matrices) = held(want.iter().cloned().map(Packed::from).collect());
            assert_eq!(matrices.len(), want.len());
            for (m, t) in matrices.iter().zip(&want) {
                let rows = memory.rows(m);
                assert_eq!((m.rows, m.cols), (t.rows, t.cols));
                assert_eq!((rows.rows, rows.groups), (t.rows, t.cols / GROUP));
                assert_eq!((rows.codes, rows.params), (&t.codes[..], &t.qparams[..]));
                let (mut got, mut row) = (vec![0.0; t.cols], vec![0.0; t.cols]);
                for r in [0, t.rows / 2, t.rows - 1] {
                    memory.dequantize_row(m, r, &mut got);
                    t.dequantize_row(r, &mut row);
                    assert_eq!(got, row, "row {r}");
                }
            }
            let words: usize = want.iter().map(|t| t.codes.len() + t.qparams.len()).sum();
            assert!(memory.bytes() >= 4 * words);
        }
    }

    /// A Q8 g32 matrix next to a Q4 one: its rows read back its tensor's values, and its
    /// bytes (twice a Q4 matrix's codes) count.
    #[test]
    fn q8_matrices_read_back_and_count_their_bytes() {
        let q4 = tensors(&[(64, 128)], 3).remove(0);
        let data: Vec<f32> = (0..96 * 160)
            .map(|i| (i % 23) as f32 / 11.0 - 1.0)
            .collect();
        let q8 = Q8Tensor::quantize(&data, 96, 160).unwrap();
        for held in [WeightMemory::kept, WeightMemory::packed] {
            let (memory, m) = held(vec![Packed::from(q4.clone()), Packed::from(&q8)]);
            let rows = memory.rows(&m[1]);
            assert_eq!((rows.format, rows.rows, rows.groups), (Format::Q8, 96, 3));
            let (mut got, mut want) = (vec![0.0; 160], vec![0.0; 160]);
            for r in [0, 95] {
                memory.dequantize_row(&m[1], r, &mut got);
                q8.dequantize_row(r, &mut want);
                assert_eq!(got, want, "row {r}");
            }
            // Q4: 64·128/8 + 64·2 words; Q8: 96·3·(16 + 1) words.
            assert!(memory.bytes() >= 4 * (64 * 16 + 64 * 2 + 96 * 3 * 17));
        }
    }

    /// On Linux the packed memory is advised as huge pages wherever the system allows
    /// them, and the kernel sees its mapping as eligible.
    #[cfg(target_os = "linux")]
    #[test]
    fn packed_memory_is_advised_as_huge_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let tensors = tensors(&[(4096, 2048)], 9).into_iter().map(Packed::from);
        let (memory, matrices) = WeightMemory::packed(tensors.collect());
        if mode.is_empty() || mode.contains("[never]") {
            return assert_eq!(memory.huge_page_bytes(), 0, "THP: {mode:?}");
        }
        // 4 MiB of codes: at least one whole huge page.
        assert!(memory.huge_page_bytes() >= 2 << 20, "{memory:?}");
        let at = memory.rows(&matrices[0]).codes[(2 << 20) / 4..].as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mapping = smaps
            .split_inclusive('\n')
            .skip_while(|l| {
                let range = l.split(' ').next().unwrap_or("");
                let Some((a, b)) = range.split_once('-') else {
                    return true;
                };
                let (a, b) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16));
                !matches!((a, b), (Ok(a), Ok(b)) if a <= at && at < b)
            })
            .take_while(|l| !l.starts_with("VmFlags"))
            .collect::<String>();
        let eligible = mapping
            .lines()
            .find_map(|l| l.strip_prefix("THPeligible:"))
            .map(str::trim);
        assert_eq!(eligible, Some("1"), "{mapping}");
    }
}
