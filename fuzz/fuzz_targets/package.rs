//! libFuzzer on `pocketrt_fuzz::package` (what it checks is said there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pocketrt_fuzz::package::run(data));
