// The pocketrt demo: load a model in a Worker (the page never blocks) and chat with it
// through the OpenAI-shaped API (`chat.completions.create`, streamed). The chat is saved
// after every reply (`autoSave`) and restored when the page loads the model again
// (`restore`: the history back in the KV cache, no prefill); "New chat" deletes it.
import { createWorker, hasWebGPU, threadSupport } from '../pkg/pocket.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
$('url').value = params.get('model') ?? 'taobao-mnn/MNN-Pocket-0.3B-GGUF';

let worker = null;
let model = null;
let messages = [];
let stopper = null;
/** The session snapshot the demo keeps its chat in (per model). */
const SESSION = 'demo';

function showError(e) {
  $('error').hidden = false;
  $('error').textContent = `${e.code ? `[${e.code}] ` : ''}${e.message ?? e}`;
}

function progress(ev) {
  const bar = $('progress');
  bar.hidden = false;
  bar.max = ev.total || 1;
  bar.value = ev.loaded;
  const shard = ev.shard == null ? '' : ` shard ${ev.shard + 1}/${ev.shards}`;
  const mb = (n) => (n / 1048576).toFixed(1);
  $('phase').textContent = `${ev.phase}${shard}: ${mb(ev.loaded)} / ${mb(ev.total)} MB`;
}

async function load(url, options = {}) {
  $('error').hidden = true;
  $('load').disabled = true;
  try {
    if (model) await model.unload();
    worker ??= createWorker(new URL('../pkg/worker.js', import.meta.url));
    const backend = params.get('backend') ?? $('backend-choice').value;
    // ?profile=gpu|lavapipe|swiftshader forces the WebGPU device profile.
    const profile = params.get('profile') ?? undefined;
    const opts = { ...options, backend, profile, onProgress: progress, autoSave: SESSION };
    try {
      model = await worker.load(url, { ...opts, restore: SESSION });
    } catch (e) {
      if (!e.code?.startsWith('SESSION_')) throw e;
      // A snapshot this model cannot take (another model or version): start afresh.
      model = await worker.load(url, opts);
      await model.sessions.delete(SESSION);
    }
    const i = model.info;
    const how = i.profileDetail?.forced ? 'forced' : 'detected';
    const prof = i.profile ? `, profile ${i.profile} (${how})` : '';
    $('phase').textContent =
      `ready: ${i.shards} shards (${i.shardsFromCache} from cache), context ${i.context}, ${i.adapter}${prof}`;
    const threads = i.backend === 'cpu' ? `, ${i.threads} thread${i.threads === 1 ? '' : 's'}` : '';
    $('backend').textContent = `backend: ${i.backend}${threads} (${i.backendReason})`;
    $('threads').textContent = i.threadsReason;
    document.body.dataset.backend = i.backend;
    $('chat').hidden = false;
    messages = [];
    $('messages').replaceChildren();
    redraw(model.restored);
    document.body.dataset.state = 'ready';
  } catch (e) {
    showError(e);
    document.body.dataset.state = 'error';
  } finally {
    $('load').disabled = false;
  }
}

/** The chat a restored snapshot kept: its system prompt into the settings, each message
 * as a bubble. */
function redraw(restored) {
  for (const m of restored?.messages ?? []) {
    if (m.role === 'system') {
      $('system').value = m.content;
      continue;
    }
    messages.push({ role: m.role, content: m.content });
    if (m.role === 'assistant') {
      const out = replyBubble();
      if (m.reasoning_content) out.reasoning(m.reasoning_content);
      out.content(m.content);
    } else {
      bubble(m.role, m.content);
    }
  }
  if (restored) $('phase').textContent += `; chat restored (${restored.tokens} tokens, ${restored.prefilled ? 'prefilled' : 'no prefill'})`;
}

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  div.textContent = text;
  $('messages').append(div);
  return div;
}

/** The assistant's bubble: its thinking collapsed above the answer. */
function replyBubble() {
  const div = bubble('assistant', '');
  const thinking = document.createElement('details');
  thinking.className = 'reasoning';
  thinking.hidden = true;
  thinking.innerHTML = '<summary>thinking</summary><div></div>';
  const answer = document.createElement('span');
  div.append(thinking, answer);
  return {
    reasoning: (t) => {
      thinking.hidden = false;
      thinking.lastChild.textContent = t;
    },
    content: (t) => (answer.textContent = t),
  };
}

/** The "JSON output" setting as OpenAI's response_format: the schema in the text box
 * (an error in it is shown, nothing is sent), any JSON object when it is empty. */
function responseFormat() {
  if (!$('json').checked) return undefined;
  const text = $('schema').value.trim();
  if (!text) return { type: 'json_object' };
  return { type: 'json_schema', json_schema: { name: 'demo', schema: JSON.parse(text), strict: true } };
}

/** The conversation as OpenAI messages: the system prompt (if any) first. */
function conversation() {
  const system = $('system').value.trim();
  return system ? [{ role: 'system', content: system }, ...messages] : messages;
}

async function send(e) {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || !model) return;
  let response_format;
  try {
    response_format = responseFormat();
  } catch (err) {
    return showError(new Error(`the JSON Schema is not JSON: ${err.message}`));
  }
  $('prompt').value = '';
  messages.push({ role: 'user', content: text });
  bubble('user', text);
  const out = replyBubble();
  stopper = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  document.body.dataset.state = 'generating';
  let reply = '';
  let reasoning = '';
  let count = 0;
  const start = performance.now();
  const speed = () => (count / ((performance.now() - start) / 1000)).toFixed(1);
  try {
    const max = Number($('max').value) || 128;
    const request = {
      messages: conversation(),
      // A limit past the context means "as many as fit" (unset); OpenAI's API would refuse it.
      max_tokens: max < model.info.context ? max : undefined,
      temperature: Number($('temperature').value),
      chat_template_kwargs: { enable_thinking: $('thinking').checked },
      response_format,
      stream: true,
      stream_options: { include_usage: true },
    };
    const stream = await model.chat.completions.create(request, { signal: stopper.signal });
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta ?? {};
      if (delta.reasoning_content) out.reasoning((reasoning += delta.reasoning_content));
      if (delta.content) out.content((reply += delta.content));
      if (delta.content || delta.reasoning_content) count += 1;
      $('speed').textContent = `${speed()} chunks/s`;
      if (chunk.usage) {
        $('speed').textContent = `${chunk.usage.completion_tokens} tokens, ${speed()} tokens/s`;
      }
    }
  } catch (err) {
    if (err.code !== 'ABORTED') showError(err);
  } finally {
    messages.push({ role: 'assistant', content: reply });
    $('send').disabled = false;
    $('stop').disabled = true;
    document.body.dataset.state = 'ready';
  }
}

function reset() {
  stopper?.abort();
  messages = [];
  $('messages').replaceChildren();
  $('speed').textContent = '';
  model?.sessions.delete(SESSION).catch(showError);
}

if (!hasWebGPU()) {
  $('nogpu').hidden = false;
  $('nogpu').textContent =
    'WebGPU is not available in this browser: models run on the CPU backend (slower).';
}
$('threads').textContent = threadSupport().reason;
{
  $('load').onclick = () => load($('url').value);
  // Local files: each by name as a blob URL; a package folder needs its manifest.json.
  const loadLocal = (files) => {
    const urls = {};
    // A folder's own files only (a subfolder's manifest.json must not replace its own).
    for (const f of files) {
      if ((f.webkitRelativePath || f.name).split('/').length <= 2) urls[f.name] = URL.createObjectURL(f);
    }
    const gguf = Object.keys(urls).find((n) => n.toLowerCase().endsWith('.gguf'));
    if (urls['manifest.json']) return load('local', { files: urls, cache: false });
    if (gguf) return load(gguf, { files: urls, cache: false });
    return showError(new Error('choose a pocket package folder (with manifest.json) or a .gguf file'));
  };
  $('files').onchange = () => loadLocal($('files').files);
  $('file').onchange = () => loadLocal($('file').files);
  $('form').onsubmit = send;
  $('stop').onclick = () => stopper?.abort();
  $('reset').onclick = reset;
  $('json').onchange = () => ($('schema-label').hidden = !$('json').checked);
  if (params.get('model') && params.get('autoload') !== '0') load(params.get('model'));
}
