//! GPT-2's byte ↔ unicode map ("byte-level" BPE).
//!
//! Every byte is shown as one printable char so that BPE vocabularies can be stored as text:
//! the printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 onwards in
//! byte order. `Ġ` (U+0120) is the space, `Ċ` (U+010A) the newline.

use std::sync::OnceLock;

struct Tables {
    byte_to_char: [char; 256],
    /// Indexed by `char as u32` for chars below 0x200 (all mapped chars are), 0xFFFF = none.
    char_to_byte: [u16; 0x200],
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut byte_to_char = ['\0'; 256];
        let mut char_to_byte = [u16::MAX; 0x200];
        let printable = |b: u32| {
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
        };
        let mut next = 0x100u32;
        for b in 0..256u32 {
            let c = if printable(b) {
                b
            } else {
                next += 1;
                next - 1
            };
            // c < 0x200 by construction (at most 0x100 + 68).
            byte_to_char[b as usize] = char::from_u32(c).unwrap_or('\0');
            char_to_byte[c as usize] = b as u16;
        }
        Tables {
            byte_to_char,
            char_to_byte,
        }
    })
}

/// The char that stands for byte `b`.
pub fn byte_to_char(b: u8) -> char {
    tables().byte_to_char[b as usize]
}

/// The byte a char stands for, or `None` for chars outside the map.
pub fn char_to_byte(c: char) -> Option<u8> {
    let i = c as usize;
    if i < 0x200 {
        let b = tables().char_to_byte[i];
        (b != u16::MAX).then_some(b as u8)
    } else {
        None
    }
}

/// Bytes → their byte-level text (e.g. `" hi"` → `"Ġhi"`).
pub fn encode_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

/// The bytes a vocabulary piece stands for. Like HF's ByteLevel decoder: when any char of the
/// piece is outside the byte map (added tokens such as `<|im_start|>` are plain text, and all
/// their chars happen to be in the map; others may not), the piece's own UTF-8 is used.
pub fn decode_piece(piece: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(piece.len());
    for c in piece.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => return piece.as_bytes().to_vec(),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_with_gpt2_landmarks() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('中'), None);
        assert_eq!(decode_piece("Ġhi"), b" hi");
        assert_eq!(decode_piece("中"), "中".as_bytes());
    }
}
