//! The safetensors header reader (a whole file in memory): every tensor it accepts must lie
//! inside the file.

use pocketrt::format::safetensors::parse_header;

pub fn run(data: &[u8]) {
    let path = std::path::Path::new("fuzz.safetensors");
    let Ok(tensors) = parse_header(&mut &data[..], data.len() as u64, path) else {
        return;
    };
    for t in tensors {
        assert!(
            t.start + t.len <= data.len() as u64,
            "{} outside the file",
            t.name
        );
    }
}
