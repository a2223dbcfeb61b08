mod real_data;

#[test]
fn file() {
    let (path, sha) = real_data::q8_0::coder_q8_0_gguf("x");
    println!("{path:?} {sha}");
}
