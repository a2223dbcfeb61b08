// Browser tests on real model data (run by run.js): the real Qwen2.5-Coder-0.5B-Instruct
// Q4_K_M GGUF (POCKETRT_CODER_GGUF, which scripts/test sets from
// `scripts/fetch-test-models qwen-coder`), streamed from its URL with the default
// `weights: "keep"` (every matrix Q8 g32: its Q5_0/Q8_0 ones exactly, its Q4_K/Q6_K ones
// requantized, as the native engine does), against llama.cpp's greedy continuations of
// the reference prompts (tests/fixtures/oracle/llamacpp/reference.json, as
// tests/cpu_fast_real_keep.rs checks natively). Long: ~500 MB streamed and converted per
// load, and WebGPU on SwiftShader runs Q8 at about a token a second.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load, plainPage } from './cases.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const REFERENCE = path.join(here, '../../tests/fixtures/oracle/llamacpp/reference.json');

/** The coder GGUF's URL on the test server (run.js mounts its folder as models/coder). */
function coderUrl() {
  const gguf = process.env.POCKETRT_CODER_GGUF;
  assert.ok(gguf && fs.existsSync(gguf), 'POCKETRT_CODER_GGUF must name the real coder GGUF (scripts/fetch-test-models qwen-coder)');
  return `/models/coder/${path.basename(gguf)}`;
}

/** Greedy ids of `n` tokens after `prompt` on `window.model`, with the prompt's ids. */
function greedy(page, prompt, n) {
  return page.evaluate(
    async ({ prompt, n }) => ({
      ids: window.model.encode(prompt),
      tokens: await window.model.generateTokens(prompt, { maxTokens: n }),
    }),
    { prompt, n },
  );
}

export const tests = {
  // The CPU backend (wasm) on every reference prompt; WebGPU (SwiftShader, forced) on the
  // first: each greedy continuation equal to llama.cpp's, token for token.
  async long_the_real_coder_q4_k_m_gguf_continues_like_llama_cpp_on_the_cpu_backend_and_webgpu({ page, server }) {
    const url = coderUrl();
    const { cases } = JSON.parse(fs.readFileSync(REFERENCE, 'utf8'));
    await plainPage(page, server);
    for (const [backend, prompts] of [['cpu', cases.length], ['webgpu', 1]]) {
      const r = await load(page, url, { backend, cache: false, contextLength: 64 });
      assert.ok(r.info, `${backend}: load failed: ${r.code} ${r.message}`);
      assert.equal(r.info.backend, backend);
      console.log(`     ${backend}: loaded in ${(r.ms / 1000).toFixed(1)} s`);
      for (const c of cases.slice(0, prompts)) {
        const t0 = Date.now();
        const got = await greedy(page, c.prompt, c.generated_ids.length);
        const s = (Date.now() - t0) / 1000;
        assert.deepEqual(got.ids, c.prompt_ids, `${backend}: the prompt's ids are llama.cpp's`);
        const same = got.tokens.findIndex((t, i) => t !== c.generated_ids[i]);
        console.log(`     ${backend} ${JSON.stringify(c.prompt)}: ${same < 0 ? got.tokens.length : same}/${c.generated_ids.length} tokens as llama.cpp (${(got.tokens.length / s).toFixed(1)} tok/s with prefill)`);
        assert.deepEqual(got.tokens, c.generated_ids, `${backend} ${JSON.stringify(c.prompt)}: llama.cpp's greedy tokens`);
      }
      await page.evaluate(() => window.model.unload());
    }
  },
};
