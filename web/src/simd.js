// Which build of the wasm module's CPU kernels a browser runs. scripts/build-web ships each
// build (single-threaded and threads/) twice: with simd128 (every browser we target) and
// with relaxed SIMD as well (relaxed/pocketrt_bg.wasm next to it: int8 dot products by
// i32x4.relaxed_dot_i8x16_i7x16_add_s: Chromium since 114; not Safari). Both have
// the same JS glue, so the loader only picks which .wasm that glue instantiates; a
// browser without relaxed SIMD would reject the relaxed module outright, so it is chosen
// only where a tiny module using the instruction validates.

const CONST0 = [0xfd, 0x0c, ...new Array(16).fill(0)]; // v128.const 0
// (func (result v128) (i32x4.relaxed_dot_i8x16_i7x16_add_s (v128.const 0) ×3))
const BODY = [0x00, ...CONST0, ...CONST0, ...CONST0, 0xfd, 0x93, 0x02, 0x0b];
const PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type section: [] → [v128]
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x0a, BODY.length + 2, 0x01, BODY.length, ...BODY, // code section
]);

let supported;

/** Whether this engine runs wasm relaxed SIMD (validated once). */
export function relaxedSimdSupported() {
  try {
    supported ??= WebAssembly.validate(PROBE);
  } catch {
    supported = false;
  }
  return supported;
}

