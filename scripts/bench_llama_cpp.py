#!/usr/bin/env python3
"""Greedy decode tok/s of llama.cpp's CPU engine (llama-cpp-python) on a GGUF, the way
benches/cpu_decode.rs measures pocketrt: PROMPT tokens fed, then TOKENS timed one-token
steps (argmax of the last logits), best of REPS; and prompt tok/s at each --prefill length
(one `eval` of the whole prompt from position 0, llama.cpp's pp: batches of n_batch = 512).
Prints one JSON object.

A GGUF without tokenizer metadata (as `pocketrt synth --gguf` writes it) is copied once
with `tokenizer.ggml.model = "none"` added, which llama.cpp needs to load a model.

Usage: bench_llama_cpp.py GGUF [--threads 2] [--tokens 64] [--prompt 8] [--reps 3]
                          [--prefill 512,1024]
"""
import argparse, json, os, struct, sys, tempfile, time

# Byte sizes of the fixed-size GGUF metadata value types.
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def with_no_vocab(src, dst):
    """Copy GGUF `src` to `dst` with tokenizer.ggml.model = "none" (False if present)."""
    b = open(src, "rb").read()
    if b[:4] != b"GGUF":
        raise SystemExit(f"{src}: not a GGUF file")
    n_tensors, n_kv = struct.unpack_from("<QQ", b, 8)

    def string(p):
        n = struct.unpack_from("<Q", b, p)[0]
        return p + 8 + n, b[p + 8 : p + 8 + n]

    def skip_value(p, t):
        if t == STRING:
            return string(p)[0]
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            for _ in range(n):
                p = skip_value(p, et)
            return p
        return p + SIZES[t]

    p, align = 24, 32
    for _ in range(n_kv):
        p, key = string(p)
        t = struct.unpack_from("<I", b, p)[0]
        if key == b"tokenizer.ggml.model":
            return False
        if key == b"general.alignment":
            align = struct.unpack_from("<I", b, p + 4)[0]
        p = skip_value(p + 4, t)
    kv_end = p
    for _ in range(n_tensors):
        p, _ = string(p)
        dims = struct.unpack_from("<I", b, p)[0]
        p += 4 + 8 * dims + 4 + 8
    data = (p + align - 1) // align * align
    key, value = b"tokenizer.ggml.model", b"none"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", STRING, len(value)) + value
    head = b[:8] + struct.pack("<QQ", n_tensors, n_kv + 1) + b[24:kv_end] + kv + b[kv_end:p]
    head += b"\0" * (-len(head) % align)
    with open(dst, "wb") as f:
        f.write(head)
        f.write(b[data:])
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prefill", default="")
    a = ap.parse_args()
    prefill = [int(n) for n in a.prefill.split(",") if n and int(n) > 0]
    import llama_cpp, numpy as np

    path = a.gguf
    tmp = os.path.join(tempfile.gettempdir(), f"pocketrt-llama-{os.getpid()}.gguf")
    if with_no_vocab(a.gguf, tmp):
        path = tmp
    try:
        m = llama_cpp.Llama(model_path=path, n_threads=a.threads, n_threads_batch=a.threads,
                            n_ctx=max([a.prompt + a.tokens + 8] + prefill), verbose=False)
        vocab = m.n_vocab()
        rates = []
        for _ in range(a.reps):
            m.reset()
            prompt = [(i * 2654435761) % vocab for i in range(a.prompt)]
            for t in prompt:
                m.eval([t])
            tok = prompt[-1] if prompt else 1
            t0 = time.perf_counter()
            for _ in range(a.tokens):
                m.eval([tok])
                tok = int(np.argmax(m.scores[m.n_tokens - 1]))
            rates.append(a.tokens / (time.perf_counter() - t0))
        prefills = []
        for n in prefill:
            prompt = [(i * 2654435761) % vocab for i in range(n)]
            pp = []
            for _ in range(a.reps):
                m.reset()
                t0 = time.perf_counter()
                m.eval(prompt)
                pp.append(n / (time.perf_counter() - t0))
            prefills.append({"tokens": n, "tok_s": pp, "tok_s_best": max(pp)})
    finally:
        if path == tmp:
            os.remove(tmp)
    print(json.dumps({"engine": f"llama.cpp (llama-cpp-python {llama_cpp.__version__})",
                      "threads": a.threads, "tok_s": rates, "tok_s_best": max(rates),
                      "prefill": prefills}))


if __name__ == "__main__":
    sys.exit(main())
