// The official npm `openai` package's `embeddings.create` against a running `pocketrt
// serve` on the tiny fixture model (tests/serve.rs runs this):
//     node tests/serve/embeddings.mjs BASE_URL API_KEY NATIVE.json
// The vectors must equal the native Session::embed's (NATIVE.json, as clients.py reads
// it), in the client's default encoding (base64, decoded by the client) and as floats.

import { readFileSync } from "node:fs";

const { default: OpenAI } = await import(
  new URL("../../web/node_modules/openai/index.mjs", import.meta.url)
);
const [base, key, nativePath] = process.argv.slice(2);
const native = JSON.parse(readFileSync(nativePath, "utf8"));
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log("ok", what.split(":")[0]);
}

function same(data, want, what) {
  check(data.length === want.length, `${what}: ${data.length} vectors`);
  data.forEach((d, i) => {
    // Equal as f32 (JSON carries an f32's shortest decimal, which parses to another double).
    const err = Math.max(...d.embedding.map((v, j) => Math.abs(Math.fround(v) - Math.fround(want[i][j]))));
    check(d.index === i && d.embedding.length === want[i].length && err === 0, `${what} ${i}: max abs ${err}`);
  });
}

let r = await client.embeddings.create({ model: "tiny", input: native.texts });
check(r.object === "list" && r.usage.prompt_tokens === native.tokens.reduce((a, b) => a + b), `usage: ${JSON.stringify(r.usage)}`);
same(r.data, native.vectors, "default (base64)");
r = await client.embeddings.create({ model: "tiny", input: native.texts, encoding_format: "float" });
same(r.data, native.vectors, "float");
r = await client.embeddings.create({ model: "tiny", input: native.texts[0], dimensions: 16 });
same(r.data, native.dims16.slice(0, 1), "dimensions 16");
try {
  await client.embeddings.create({ model: "tiny", input: "a", dimensions: 5000 });
  throw new Error("expected an error");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === "dimensions", `400 dimensions: ${e}`);
}
