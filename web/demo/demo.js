// The pocketrt demo: load a model in a Worker (the page never blocks) and chat with it.
import { createWorker, hasWebGPU, threadSupport } from '../pkg/pocket.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
$('url').value = params.get('model') ?? 'taobao-mnn/MNN-Pocket-0.3B-GGUF';

let worker = null;
let model = null;
let messages = [];
let stopper = null;

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
    model = await worker.load(url, { ...options, backend, profile, onProgress: progress });
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
    document.body.dataset.state = 'ready';
  } catch (e) {
    showError(e);
    document.body.dataset.state = 'error';
  } finally {
    $('load').disabled = false;
  }
}

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  div.textContent = text;
  $('messages').append(div);
  return div;
}

async function send(e) {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || !model) return;
  $('prompt').value = '';
  messages.push({ role: 'user', content: text });
  bubble('user', text);
  const out = bubble('assistant', '');
  stopper = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  document.body.dataset.state = 'generating';
  let reply = '';
  let count = 0;
  const start = performance.now();
  try {
    const opts = { maxTokens: Number($('max').value) || 128, signal: stopper.signal,
      onToken: () => {
        count += 1;
        $('speed').textContent = `${(count / ((performance.now() - start) / 1000)).toFixed(1)} tokens/s`;
      } };
    for await (const piece of model.chat(messages, opts)) {
      reply += piece;
      out.textContent = reply;
    }
    const s = await model.stats();
    if (s) $('speed').textContent = `${s.generatedTokens} tokens, ${s.tokensPerSecond.toFixed(1)} tokens/s`;
  } catch (err) {
    if (err.code !== 'ABORTED') showError(err);
  } finally {
    messages.push({ role: 'assistant', content: reply });
    $('send').disabled = false;
    $('stop').disabled = true;
    document.body.dataset.state = 'ready';
  }
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
    for (const f of files) urls[f.name] = URL.createObjectURL(f);
    const gguf = Object.keys(urls).find((n) => n.toLowerCase().endsWith('.gguf'));
    if (urls['manifest.json']) return load('local', { files: urls, cache: false });
    if (gguf) return load(gguf, { files: urls, cache: false });
    return showError(new Error('choose a pocket package folder (with manifest.json) or a .gguf file'));
  };
  $('files').onchange = () => loadLocal($('files').files);
  $('file').onchange = () => loadLocal($('file').files);
  $('form').onsubmit = send;
  $('stop').onclick = () => stopper?.abort();
  if (params.get('model') && params.get('autoload') !== '0') load(params.get('model'));
}
