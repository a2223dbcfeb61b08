//! The model thread: loads the model, then answers jobs one at a time in the order they
//! came (a FIFO queue: fair, and nothing to tune), each in the KV cache slot whose tokens
//! it continues with the longest shared prefix, or else in the least recently used slot
//! (see [`Slots::route`]). A job reports back on its channel: started (the
//! request was valid), the stream's chunks, the whole response, or an error. The slot
//! API's actions (`slots.rs`) are jobs of the same queue.

use super::errors::unavailable;
use super::job::{Job, Msg, Request};
use super::metrics::Metrics;
use super::prefix::{self, Primed};
use super::slots::Slots;
use super::{ModelInfo, State};
use crate::api::{ApiError, ChatRun, CompletionRun, EmbeddingRequest, Run, RunCore, GPU_LOST};
use crate::generate::GenerateStats;
use crate::sampler::TokenLogprobs;
use crate::tokenizer::Tokenizer;
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Load the model, report it ready, answer jobs until the server stops.
pub(super) fn run(state: Arc<State>, load: super::Loader, jobs: Receiver<Job>) {
    let loaded = load().and_then(|(s, reopen)| Slots::new(s, reopen, state.opts.parallel));
    let mut model = match loaded {
        Ok(m) => m,
        Err(e) => return state.fail(e),
    };
    let engine = model.session.engine();
    let info = ModelInfo {
        context: engine.context(),
        backend: engine.description().to_string(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    eprintln!(
        "pocketrt serve: ready: {} ({}; context {}, {} KV slot(s))",
        state.opts.model_name, info.backend, info.context, state.opts.parallel
    );
    let _ = state.model.set(info);
    loop {
        let job = match jobs.recv_timeout(Duration::from_millis(50)) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) if state.stopping() => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        state.metrics.queued.fetch_sub(1, Ordering::Relaxed);
        if job.reply.is_closed() || Instant::now() >= job.deadline {
            // Gone (or out of time) while queued: nothing to generate.
            state.metrics.aborted.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if state.stopping() {
            let _ = job
                .reply
                .send(Msg::Failed(unavailable("the server is stopping")));
            continue;
        }
        state.metrics.active.fetch_add(1, Ordering::Relaxed);
        answer(&mut model, job, &state);
        state.metrics.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A checked request, ready to run.
enum Built {
    Chat(ChatRun),
    Completion(CompletionRun),
}

/// Answer `job` in `model`'s slots, reporting on its channel.
fn answer(model: &mut Slots, job: Job, state: &State) {
    let context = model.session.engine().context();
    let tokenizer = model.session.tokenizer();
    let built = match &job.request {
        Request::Chat(req) => match model.session.template() {
            None => Err(ApiError::unsupported(
                "messages",
                "the model has no chat template: use /v1/completions",
            )),
            Some(t) => ChatRun::new(req, tokenizer, t, context).map(Built::Chat),
        },
        Request::Completion(req) => {
            CompletionRun::new(req, tokenizer, context).map(Built::Completion)
        }
        Request::Embeddings(req) => return embed(model, req, &job, state),
        Request::Slot(req) => {
            let t0 = Instant::now();
            let dir = state.opts.slot_save_path.as_deref();
            let msg = match model.slot_request(req, dir, state) {
                Ok(doc) => {
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    eprintln!("{} 200 {ms:.0} ms", req.label());
                    Msg::Done(doc.to_string())
                }
                Err(e) => Msg::Failed(e),
            };
            let _ = job.reply.send(msg);
            return;
        }
    };
    // The request's `speculative` against the server's `--spec`.
    let built = built.map(|mut b| {
        let default = state.opts.speculative;
        match &mut b {
            Built::Chat(run) => run.apply_speculation(default),
            Built::Completion(run) => run.apply_speculation(default),
        }
        b
    });
    match built {
        Ok(Built::Chat(run)) => {
            let system = match (&job.request, &state.opts.prefix_cache) {
                (Request::Chat(req), Some(_)) => prefix::system_prefix(
                    req,
                    &model.session,
                    run.prompt(),
                    state.opts.prefix_cache_min_tokens,
                ),
                _ => None,
            };
            go(model, run, &job, state, system)
        }
        Ok(Built::Completion(run)) => go(model, run, &job, state, None),
        Err(e) => {
            let _ = job.reply.send(Msg::Failed(e));
        }
    }
}

/// Run a valid request to its end, reporting on the job's channel. `system`: the
/// prompt's first tokens are a system prefix the prefix cache keeps.
fn go<R>(model: &mut Slots, run: R, job: &Job, state: &State, system: Option<usize>)
where
    R: Run,
    R::Chunk: Serialize,
    R::Response: Serialize,
{
    let mut prefix = match model.route(run.prompt()) {
        Ok(p) => p,
        Err(e) => {
            let _ = job.reply.send(Msg::Failed(e.into()));
            return;
        }
    };
    let mut primed = Primed::default();
    if let (Some(n), Some(dir)) = (system, &state.opts.prefix_cache) {
        (prefix, primed) =
            prefix::use_prefix(&mut model.session, dir, run.prompt(), n, prefix, state);
    }
    if state.opts.verbose {
        let spec = match run.options().speculative {
            Some(s) => format!("speculative, up to {} drafts per step", s.draft_max),
            None if state.opts.speculative.is_some() => {
                "not speculative (the request's \"speculative\": false)".into()
            }
            None => "not speculative".into(),
        };
        eprintln!(
            "  {}: {} prompt tokens, {prefix} shared with its slot; {spec}",
            job.route,
            run.prompt().len()
        );
    }
    let _ = job.reply.send(Msg::Started);
    let stream = run.stream();
    let watched = Watched {
        run,
        job,
        state,
        first: false,
        primed,
    };
    let mut aborted = false;
    let result = model.session.drive(watched, |chunk| {
        let sent = !stream || job.reply.send(Msg::Chunk(json(chunk))).is_ok();
        aborted |= !sent || job.reply.is_closed();
        !aborted
    });
    let ended = Instant::now();
    let gone = aborted || job.reply.is_closed();
    match result {
        Ok((response, stats)) => {
            let stats = primed.apply(&stats);
            let _ = job.reply.send(Msg::Done(json(&response)));
            log(job, &stats, ended, gone);
            record(&state.metrics, &stats, gone);
        }
        Err(e) if e.error.code.as_deref() == Some(GPU_LOST) => {
            eprintln!("POST {} 503 (during generation): {e}", job.route);
            let _ = job.reply.send(Msg::Failed(unavailable(
                "the GPU device was lost during generation; the server is loading the \
                 model again: retry the request",
            )));
            model.reload();
        }
        Err(e) => {
            eprintln!("POST {} {} (during generation): {e}", job.route, e.status());
            let _ = job.reply.send(Msg::Failed(e));
        }
    }
}

/// Answer an embeddings request (`Session::embeddings`: each input its own sequence,
/// the session's cache left as it was, so no slot is routed). A lost GPU device is a
/// 503 and a reload, as during a generation.
fn embed(model: &mut Slots, req: &EmbeddingRequest, job: &Job, state: &State) {
    let result = model.session.embeddings(req, &state.opts.model_name);
    let ms = job.received.elapsed().as_secs_f64() * 1e3;
    match result {
        Ok(response) => {
            let tokens = response.usage.prompt_tokens;
            eprintln!(
                "POST {} 200 {ms:.0} ms: {} input(s), {tokens} tokens",
                job.route,
                response.data.len()
            );
            Metrics::add(&state.metrics.prompt_tokens, tokens as u64);
            let _ = job.reply.send(Msg::Done(json(&response)));
        }
        Err(e) if e.error.code.as_deref() == Some(GPU_LOST) => {
            eprintln!("POST {} 503: {e}", job.route);
            let _ = job.reply.send(Msg::Failed(unavailable(
                "the GPU device was lost; the server is loading the model again: retry \
                 the request",
            )));
            model.reload();
        }
        // The route logs the error's status.
        Err(e) => {
            let _ = job.reply.send(Msg::Failed(e));
        }
    }
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("responses serialize")
}

/// One line per generation: route, status, tokens, timings, drafts, why it ended.
fn log(job: &Job, stats: &GenerateStats, ended: Instant, gone: bool) {
    let gone = if gone { " (client gone)" } else { "" };
    let s = stats.speculation;
    let drafts = match s.steps {
        0 => String::new(),
        _ => format!(
            ", drafts {}/{} accepted in {} steps",
            s.accepted, s.drafted, s.steps
        ),
    };
    eprintln!(
        "POST {} 200 {:.0} ms: prompt {} ({} cached, {:.0} tok/s), generated {} ({:.1} tok/s{drafts}), {:?}{gone}",
        job.route,
        (ended - job.received).as_secs_f64() * 1e3,
        stats.prompt_tokens,
        stats.reused_tokens,
        stats.prompt_tok_s(),
        stats.generated_tokens,
        stats.generate_tok_s(),
        stats.finish,
    );
}

fn record(m: &Metrics, stats: &GenerateStats, aborted: bool) {
    Metrics::add(&m.prompt_tokens, stats.prompt_tokens as u64);
    Metrics::add(&m.cached_tokens, stats.reused_tokens as u64);
    Metrics::add(&m.completion_tokens, stats.generated_tokens as u64);
    Metrics::add(&m.prompt_micros, (stats.prompt_seconds * 1e6) as u64);
    Metrics::add(&m.generate_micros, (stats.generate_seconds * 1e6) as u64);
    Metrics::add(&m.generations, 1);
    if aborted {
        Metrics::add(&m.aborted, 1);
    }
    m.last_tok_s
        .store(stats.generate_tok_s().to_bits(), Ordering::Relaxed);
}

/// A run that also stops when its client has gone, its deadline has passed or the
/// server is stopping: checked after every token.
struct Watched<'a, R> {
    run: R,
    job: &'a Job,
    state: &'a State,
    /// A token has come (the time to the first one is recorded).
    first: bool,
    /// Prompt tokens run before the request to save its system prefix.
    primed: Primed,
}

impl<R> Watched<'_, R> {
    fn cancelled(&self) -> bool {
        self.job.reply.is_closed() || Instant::now() >= self.job.deadline || self.state.stopping()
    }
}

impl<R: Run> Run for Watched<'_, R> {
    type Chunk = R::Chunk;
    type Response = R::Response;

    fn core(&self) -> &RunCore {
        self.run.core()
    }

    fn should_stop(&self) -> bool {
        self.run.should_stop() || self.cancelled()
    }

    fn first_chunk(&self) -> Option<R::Chunk> {
        self.run.first_chunk()
    }

    fn push(
        &mut self,
        tokenizer: &Tokenizer,
        text: &str,
        logprobs: Option<TokenLogprobs>,
    ) -> Option<R::Chunk> {
        if !self.first {
            self.first = true;
            let ttft = self.job.received.elapsed().as_micros() as u64;
            Metrics::add(&self.state.metrics.ttft_micros, ttft);
        }
        self.run.push(tokenizer, text, logprobs)
    }

    fn finish(&mut self, stats: &GenerateStats) -> (Vec<R::Chunk>, R::Response) {
        self.run.finish(&self.primed.apply(stats))
    }
}
