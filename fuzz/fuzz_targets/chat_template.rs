//! libFuzzer on `pocketrt_fuzz::chat_template` (what it checks is said there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's panic hook aborts at once, even for a panic `render` catches (it
    // turns minijinja's own panics into errors); the default hook lets it. A panic that
    // escapes still ends in libfuzzer-sys's abort: a finding.
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    pocketrt_fuzz::chat_template::run(data)
});
