// The official npm `openai` package (web/node_modules, pinned in web/package.json) against
// a running `pocketrt serve` on the tiny fixture model (tests/serve.rs runs this):
//     node tests/serve/clients.mjs BASE_URL API_KEY
// Each check throws on a mismatch (the exit code fails the Rust test).

const { default: OpenAI } = await import(
  new URL("../../web/node_modules/openai/index.mjs", import.meta.url)
);
const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

function check(cond, what) {
  if (!cond) throw new Error(what);
  console.log("ok", what.split(":")[0]);
}

const messages = [{ role: "user", content: "Hello from node" }];
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].object === "model", `models: ${JSON.stringify(models.data)}`);

const whole = await client.chat.completions.create({ model: "tiny", messages, temperature: 0, max_tokens: 20 });
const text = whole.choices[0].message.content;
check(whole.usage.completion_tokens > 0 && text.length > 0, `chat: ${JSON.stringify(whole)}`);

const stream = await client.chat.completions.create({
  model: "tiny", messages, temperature: 0, max_tokens: 20, stream: true,
  stream_options: { include_usage: true },
});
let content = "";
let usage = null;
for await (const chunk of stream) {
  content += chunk.choices[0]?.delta?.content ?? "";
  usage = chunk.usage ?? usage;
}
check(content === text, `stream = whole: ${JSON.stringify(content)} vs ${JSON.stringify(text)}`);
check(usage?.completion_tokens === whole.usage.completion_tokens, `include_usage: ${JSON.stringify(usage)}`);

const comp = await client.completions.create({ model: "tiny", prompt: "Once upon", max_tokens: 10, temperature: 0 });
check(comp.choices[0].text.length > 0 && comp.choices[0].finish_reason === "length", `completion: ${JSON.stringify(comp)}`);

// Aborting a stream mid-way (the SDK's AbortController) stops it; the server goes on.
const metrics = async () => (await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${key}` } })).text();
const abortedCount = async () => Number(/^pocketrt_requests_aborted_total (\d+)$/m.exec(await metrics())[1]);
const abortedBefore = await abortedCount();
const ac = new AbortController();
const long = await client.completions.create(
  // The end of a reply banned (the specials follow the 256 bytes): the greedy text would
  // otherwise end on its own within a few dozen tokens, before the abort reaches the server.
  { model: "tiny", prompt: "Once", temperature: 0, max_tokens: 400, stream: true, logit_bias: { 256: -100, 257: -100, 258: -100 } },
  { signal: ac.signal },
);
let n = 0;
let aborted = null;
try {
  for await (const _ of long) {
    if (++n === 3) ac.abort();
  }
} catch (e) {
  aborted = e;
}
check(aborted === null || aborted instanceof OpenAI.APIUserAbortError, `abort: ${aborted}`);
check(n < 100, `abort ends the stream: ${n} chunks of 400`);
let abortedAfter = abortedBefore;
for (let i = 0; i < 100 && abortedAfter === abortedBefore; i++) {
  await new Promise((r) => setTimeout(r, 20));
  abortedAfter = await abortedCount();
}
check(abortedAfter === abortedBefore + 1, `the server stopped the aborted stream: ${abortedBefore} -> ${abortedAfter}`);
const after = await client.chat.completions.create({ model: "tiny", messages, temperature: 0, max_tokens: 20 });
check(after.choices[0].message.content === text, "serves after an abort");

async function errorOf(call) {
  try {
    await call();
  } catch (e) {
    return e;
  }
  throw new Error("expected an error");
}
const badKey = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
let e = await errorOf(() => badKey.models.list());
check(e instanceof OpenAI.AuthenticationError && e.status === 401, `401: ${e}`);
e = await errorOf(() => client.chat.completions.create({ model: "tiny", messages, top_logprobs: 50, logprobs: true }));
check(e instanceof OpenAI.BadRequestError && e.param === "top_logprobs", `400 bad field: ${e} ${e.param}`);
e = await errorOf(() => client.get("/nope"));
check(e instanceof OpenAI.NotFoundError && e.code === "unknown_url", `404: ${e}`);
