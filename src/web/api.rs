//! What wasm-bindgen exports: `PocketModel` (load, tokenize, chat template, token-by-token
//! generation, unload). The npm package's JavaScript builds the public API on it.

use super::completion::{Completion, Endpoint};
use super::errors::{api_to_js, to_js};
use super::load::LoadReport;
use super::loader;
use super::options::{context_overflow, generate_options, LoadOptions};
use super::session::WebSession;
use crate::error::{Error, Result};
use crate::tokenizer::Message;
use js_sys::{Promise, Reflect};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// A model on the GPU. Calls that run the model return Promises; one runs at a time
/// (a second, while one is pending, fails with code `BUSY`).
#[wasm_bindgen]
pub struct PocketModel {
    session: Rc<RefCell<Option<WebSession>>>,
    /// The OpenAI-style request being answered on the session (`completion.rs`; gone
    /// with the session: on reload and unload). Taken only while `session` is borrowed.
    completion: Rc<RefCell<Option<Completion>>>,
    report: Rc<RefCell<LoadReport>>,
    /// What `reload()` loads again: the model's name and the load's options.
    url: String,
    options: JsValue,
    /// The token history and conversation of a reload that failed, for the next try.
    kept: Rc<RefCell<Option<Kept>>>,
}

/// What a reload carries to the new session: the tokens the cache held, the chat.
type Kept = (Vec<u32>, Vec<Message>);

fn to_value<T: serde::Serialize>(v: &T) -> JsValue {
    serde_json::to_string(v)
        .ok()
        .and_then(|s| js_sys::JSON::parse(&s).ok())
        .unwrap_or(JsValue::UNDEFINED)
}

/// Whether `name` is a hub id (`owner/name`) rather than a URL (the JS API resolves other
/// names against the page's URL).
#[wasm_bindgen(js_name = isHubId)]
pub fn is_hub_id(name: &str) -> bool {
    crate::hub::choose::is_hub_id(name)
}

/// The backend a load of `url` with `options` (those of `PocketModel.load`) runs on,
/// decided as the load decides it but with nothing loaded: `{ backend: "webgpu" | "cpu",
/// reason, profile, profileDetail }`, or null for a GGUF file. The JS API asks it on
/// `auto` where the CPU backend could have threads, and loads a CPU decision on the
/// threaded build.
#[wasm_bindgen(js_name = chooseBackend)]
pub async fn choose_backend(url: String, options: JsValue) -> Result<JsValue, JsValue> {
    let opts = LoadOptions::from_js(&options).map_err(to_js)?;
    let chosen = loader::choose_backend(&url, opts).await.map_err(to_js)?;
    Ok(chosen.map_or(JsValue::NULL, |c| to_value(&c)))
}

#[wasm_bindgen]
impl PocketModel {
    /// Load a model: a pocket package (folder URL or manifest URL), a GGUF URL or a hub id
    /// (`owner/name`). Options: `onProgress(event)`, `signal` (AbortSignal),
    /// `contextLength`, `parallel` (shards at once, default 4), `cache` (false: no Cache
    /// Storage), `files` (local files), `hubEndpoint`, `backend` ("webgpu" | "cpu" |
    /// "auto"), `profile` (one of `gpu::profile::PROFILE_NAMES`: the WebGPU device profile,
    /// `gpu::profile`, forced instead of detected — an unknown name, or one the adapter
    /// cannot run, fails with code `INVALID_ARGUMENT` and the reason; the CPU backend
    /// ignores it), `weights` ("keep" (default) | "q4" | "q8": how a GGUF's matrices are
    /// held on the GPU — keep: Q4_0/Q4_1 as Q4 g64, the rest (Q8_0 exactly) as Q8 g32;
    /// packages run as they are stored), `speculative` (speculative decoding of the
    /// requests that set none: "lookup" | true | { draftMax: 1..32 } | false, the
    /// default; `{ draft }`, a draft model, fails with code `UNSUPPORTED`).
    pub async fn load(url: String, options: JsValue) -> Result<PocketModel, JsValue> {
        let (session, report) = open(&url, &options).await.map_err(to_js)?;
        Ok(PocketModel {
            session: Rc::new(RefCell::new(Some(session))),
            completion: Default::default(),
            report: Rc::new(RefCell::new(report)),
            url,
            options,
            kept: Default::default(),
        })
    }

    /// After a lost GPU device (code `GPU_LOST`): load the model again with the same
    /// options — a new device, the shards from Cache Storage — and fill its KV cache with
    /// the tokens the old one held, so the conversation goes on. Resolves when done.
    // The RefCell guard held across the load is the one-call-at-a-time lock: a call
    // while the model reloads fails with BUSY.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn reload(&self) -> Promise {
        let (session, report, kept) =
            (self.session.clone(), self.report.clone(), self.kept.clone());
        let completion = self.completion.clone();
        let (url, options) = (self.url.clone(), self.options.clone());
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let (history, messages) = match guard.take() {
                Some(old) => {
                    completion.borrow_mut().take();
                    let history = old.history().to_vec();
                    let messages = old.messages.clone();
                    old.model.destroy();
                    (history, messages)
                }
                None => kept.borrow_mut().take().ok_or_else(unloaded)?,
            };
            *kept.borrow_mut() = Some((history.clone(), messages.clone()));
            super::device::forget();
            let (mut fresh, r) = open(&url, &options).await.map_err(to_js)?;
            fresh.refill(&history).await.map_err(to_js)?;
            fresh.messages = messages;
            kept.borrow_mut().take();
            *guard = Some(fresh);
            *report.borrow_mut() = r;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Test hook: destroy the WebGPU device now, as a GPU reset would (the tests reach a
    /// Worker's device only this way); whether there was one.
    #[wasm_bindgen(js_name = destroyDeviceForTesting)]
    pub fn destroy_device_for_testing(&self) -> Result<bool, JsValue> {
        self.with(|s| Ok(s.model.gpu_context().map(|c| c.device.destroy()).is_some()))
    }

    /// Test hook: whether plain sampling draws its tokens on the GPU, pipelined one step
    /// ahead (the default), or on the host step by step (the same seed's tokens, but where
    /// f32 rounding moves a draw across a boundary).
    #[wasm_bindgen(js_name = gpuDrawsForTesting)]
    pub fn gpu_draws_for_testing(&self, on: bool) -> Result<(), JsValue> {
        self.with(|s| {
            s.gpu_draws = on;
            Ok(())
        })
    }

    /// Bytes of every buffer created on the WebGPU device so far (every model loaded on it
    /// since it opened; 0 on the CPU backend): what a long generation must keep flat.
    #[wasm_bindgen(js_name = gpuBytes)]
    pub fn gpu_bytes(&self) -> Result<f64, JsValue> {
        self.with(|s| Ok(s.model.gpu_context().map_or(0, |c| c.allocated_bytes()) as f64))
    }

    /// A Promise of the WebGPU device's `GPUDeviceLostInfo` (`{ reason, message }`),
    /// settled when it is lost; null on the CPU backend.
    #[wasm_bindgen(js_name = deviceLost)]
    pub fn device_lost(&self) -> Result<JsValue, JsValue> {
        self.with(|s| {
            let lost = s.model.gpu_context().and_then(super::device::lost_promise);
            Ok(lost.map_or(JsValue::NULL, JsValue::from))
        })
    }

    /// How the load went: shards (from cache / fetched / refetched), bytes, context,
    /// adapter, profile and profileDetail (the GPU's device profile: its name and
    /// `DeviceProfile::to_json`; null without a GPU), backend ("webgpu" | "cpu"),
    /// backendReason and threads (the CPU backend's).
    pub fn info(&self) -> JsValue {
        to_value(&*self.report.borrow())
    }

    /// Token ids of `text` (special tokens recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, JsValue> {
        self.with(|s| Ok(s.tokenizer.encode(text, true)))
    }

    /// The text of `ids`.
    pub fn decode(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        self.with(|s| s.tokenizer.decode(&ids, true))
    }

    /// Start generating after `tokens`; options `{ maxTokens, temperature, topK, topP,
    /// seed, contextOverflow, keep, speculative }` (`speculative`: "lookup" | true |
    /// { draftMax } | false; unset: the load's). Resolves when the prompt is processed.
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock: a
    // concurrent call's `try_borrow_mut` fails with BUSY (never a panic).
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn begin(&self, tokens: Vec<u32>, options: JsValue) -> Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let opts = generate_options(&options, s.speculative).map_err(to_js)?;
            s.messages.clear(); // a plain generation: no chat to keep
            s.begin(&tokens, &opts).await.map_err(to_js)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The next token: `{ text, token, done, finish }`, or null when nothing runs.
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock: a
    // concurrent call's `try_borrow_mut` fails with BUSY (never a panic).
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn next(&self) -> Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let piece = s.next().await.map_err(to_js)?;
            Ok(piece.map_or(JsValue::NULL, |p| to_value(&p)))
        })
    }

    /// Start answering an OpenAI-style request: `request` is its JSON text, `kind`
    /// `"chat"` (chat.completions) or `"text"` (completions). Resolves when the prompt is
    /// processed; a bad request rejects with OpenAI's error body as `openai`.
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = completionBegin)]
    pub fn completion_begin(&self, request: String, kind: String) -> Promise {
        let (session, completion) = (self.session.clone(), self.completion.clone());
        future_to_promise(async move {
            let endpoint = Endpoint::parse(&kind).map_err(|e| api_to_js(e.into()))?;
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            completion.borrow_mut().take();
            let begun = Completion::begin(s, &request, endpoint).await;
            *completion.borrow_mut() = Some(begun.map_err(api_to_js)?);
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The running request's next chunk (its JSON text), or null once it is answered.
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = completionNext)]
    pub fn completion_next(&self) -> Promise {
        let (session, completion) = (self.session.clone(), self.completion.clone());
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let mut running = completion.borrow_mut();
            let next = match running.as_mut() {
                Some(c) => c.next(s).await,
                None => Ok(None),
            };
            let chunk = next.map_err(|e| api_to_js(e.into()))?;
            Ok(chunk.map_or(JsValue::NULL, |c| c.into()))
        })
    }

    /// Answer an OpenAI embeddings request (`request`: its JSON text): resolves to the
    /// response's JSON text; a bad request rejects with OpenAI's error body as `openai`.
    /// The conversation the cache holds is left as it was.
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn embeddings(&self, request: String) -> Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let json = s.embeddings(&request).await.map_err(api_to_js)?;
            Ok(json.into())
        })
    }

    /// The last request's whole response (its JSON text), once its chunks are taken.
    #[wasm_bindgen(js_name = completionResult)]
    pub fn completion_result(&self) -> Result<String, JsValue> {
        self.with(|_| {
            let running = self.completion.borrow();
            running
                .as_ref()
                .and_then(Completion::result)
                .map(str::to_string)
                .ok_or_else(|| Error::InvalidArgument("no request has been answered yet".into()))
        })
    }

    /// What brings the session snapshot `id` (a file of `fileBytes` now; undefined: no
    /// file) up to date: `{ parts: Uint8Array[], rewrite, at, tokens, positions,
    /// fileBytes }` — write the parts, in order, at `at` (on `rewrite`, as the whole
    /// file), the file then has `fileBytes` (`snapshot.rs`). `web/src/sessions.js` stores
    /// it.
    // The RefCell guard held across the GPU readback is the one-call-at-a-time lock.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = snapshotSave)]
    pub fn snapshot_save(&self, id: String, file_bytes: Option<f64>) -> Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let size = file_bytes.map(|b| b as u64);
            let d = s.save_delta(&id, size).await.map_err(to_js)?;
            let out = js_sys::Object::new();
            let set = |k: &str, v: JsValue| Reflect::set(&out, &k.into(), &v).map(drop);
            let parts = js_sys::Array::new();
            for part in &d.parts {
                parts.push(&js_sys::Uint8Array::from(&part[..]));
            }
            set("parts", parts.into())?;
            set("rewrite", d.rewrite.into())?;
            set("at", (d.at as f64).into())?;
            set("tokens", (d.tokens as f64).into())?;
            set("positions", (d.positions as f64).into())?;
            set("fileBytes", (d.file_bytes as f64).into())?;
            Ok(out.into())
        })
    }

    /// Restore the session snapshot `id` from its file's bytes: `{ tokens, restored,
    /// prefilled, dropped, messages, fileBytes }` (`snapshot.rs`); a bad snapshot
    /// rejects with code `SESSION_MISMATCH` or `SESSION_CORRUPT` (`fallback`: a prefill
    /// of its tokens where that can help).
    // The RefCell guard held across the GPU await is the one-call-at-a-time lock.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = snapshotRestore)]
    pub fn snapshot_restore(&self, id: String, data: Vec<u8>, fallback: bool) -> Promise {
        let session = self.session.clone();
        future_to_promise(async move {
            let mut guard = session.try_borrow_mut().map_err(|_| busy())?;
            let s = guard.as_mut().ok_or_else(unloaded)?;
            let r = s.restore(&id, data, fallback).await.map_err(to_js)?;
            Ok(to_value(&r))
        })
    }

    /// The file of snapshot `id` changed outside a save (deleted, imported): the next
    /// save writes it whole.
    #[wasm_bindgen(js_name = snapshotForget)]
    pub fn snapshot_forget(&self, id: String) -> Result<(), JsValue> {
        self.with(|s| {
            s.forget_snapshot(&id);
            Ok(())
        })
    }

    /// End the running generation.
    pub fn stop(&self) -> Result<(), JsValue> {
        self.with(|s| {
            s.stop();
            Ok(())
        })
    }

    /// `{ promptTokens, reusedTokens, promptSeconds, generatedTokens, generateSeconds,
    /// tokensPerSecond, contextShifts, overlappedReads, speculation }` of the running or
    /// last generation (null before any); `overlappedReads`: the model's token reads so
    /// far made with the next step already submitted (pipelined greedy and plain sampled
    /// decode on WebGPU); `speculation`: `{ drafted, accepted, steps,
    /// acceptedPerStep }` where the generation speculated, else null.
    pub fn stats(&self) -> Result<JsValue, JsValue> {
        self.with(|s| {
            let overlapped = s.model.overlapped_reads();
            Ok(s.stats().map_or(JsValue::NULL, |st| {
                let spec = st.speculation;
                let speculation = s.speculated().then(|| {
                    serde_json::json!({
                        "drafted": spec.drafted,
                        "accepted": spec.accepted,
                        "steps": spec.steps,
                        "acceptedPerStep": spec.accepted_per_step(),
                    })
                });
                to_value(&serde_json::json!({
                    "promptTokens": st.prompt_tokens,
                    "reusedTokens": st.reused_tokens,
                    "promptSeconds": st.prompt_seconds,
                    "generatedTokens": st.generated_tokens,
                    "generateSeconds": st.generate_seconds,
                    "tokensPerSecond": st.generate_tok_s(),
                    "contextShifts": st.context_shifts,
                    "overlappedReads": overlapped,
                    "speculation": speculation,
                }))
            }))
        })
    }

    /// Free the GPU memory; later calls fail with code `UNLOADED`.
    pub fn unload(&self) -> Result<(), JsValue> {
        let mut guard = self.session.try_borrow_mut().map_err(|_| busy())?;
        if let Some(s) = guard.take() {
            self.completion.borrow_mut().take();
            s.model.destroy();
        }
        Ok(())
    }
}

/// Load `url` with the JS `options` into a session (and how the load went).
async fn open(url: &str, options: &JsValue) -> Result<(WebSession, LoadReport)> {
    let opts = LoadOptions::from_js(options)?;
    let (overflow, speculative) = (context_overflow(options)?, opts.speculative);
    let mut l = loader::load(url, opts).await?;
    l.report.threads = crate::cpu::fast::threads();
    let mut session = WebSession::new(l.model, l.tokenizer, l.template, l.model_id);
    session.context_overflow = overflow;
    session.speculative = speculative;
    session.pooling = l.pooling;
    Ok((session, l.report))
}

impl PocketModel {
    /// Run `f` on the session; errors when it is unloaded or busy.
    fn with<T>(&self, f: impl FnOnce(&mut WebSession) -> Result<T>) -> Result<T, JsValue> {
        let mut guard = self.session.try_borrow_mut().map_err(|_| busy())?;
        let s = guard.as_mut().ok_or_else(unloaded)?;
        f(s).map_err(to_js)
    }
}

fn coded(message: &str, code: &str) -> JsValue {
    let err = js_sys::Error::new(message);
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    err.into()
}

fn busy() -> JsValue {
    coded("the model is busy (one call at a time)", "BUSY")
}

fn unloaded() -> JsValue {
    coded("the model was unloaded", "UNLOADED")
}
