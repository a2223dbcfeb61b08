// Which build of the wasm module's CPU kernels a browser runs. scripts/build-web ships each
// build (single-threaded and threads/) twice: with simd128 (every browser we target) and
// with relaxed SIMD as well (relaxed/pocketrt_bg.wasm next to it: int8 dot products by
// i32x4.relaxed_dot_i8x16_i7x16_add_s: Chromium since 114; not Safari). Both have the same
// JS glue, so the loader only picks which .wasm that glue instantiates. A browser without
// relaxed SIMD would reject the relaxed module outright, and an engine can get the
// instruction wrong (node 20's V8, relaxed SIMD behind a flag, doubles it in its baseline
// compiler), so the relaxed build is chosen only where a tiny module computing one such
// dot product (the kernels' operands: signed bytes · nibbles) validates and is right.

const v128 = (bytes) => [0xfd, 0x0c, ...bytes.map((b) => b & 0xff)]; // v128.const
const pad = (b) => [...b, ...new Array(16 - b.length).fill(0)];
const A = [-128, -1, 127, -77]; // activations (any i8)
const B = [15, 15, 7, 3]; // nibbles: the "i7" operand
const WANT = A.reduce((s, a, i) => s + a * B[i], 0); // -1277
// (func (export "f") (result i32)
//   (i32x4.extract_lane 0 (i32x4.relaxed_dot_i8x16_i7x16_add_s A B (v128.const 0))))
const BODY = [0x00, ...v128(pad(A)), ...v128(pad(B)), ...v128(pad([])), 0xfd, 0x93, 0x02, 0xfd, 0x1b, 0x00, 0x0b];
const PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type section: [] → [i32]
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // export section: "f", function 0
  0x0a, BODY.length + 2, 0x01, BODY.length, ...BODY, // code section
]);

let supported;

/** Whether this engine runs wasm relaxed SIMD's dot product right (checked once). */
export function relaxedSimdSupported() {
  try {
    supported ??= WebAssembly.validate(PROBE) && new WebAssembly.Instance(new WebAssembly.Module(PROBE)).exports.f() === WANT;
  } catch {
    supported = false;
  }
  return supported;
}
