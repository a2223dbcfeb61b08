//! The model thread: loads the model, then answers jobs one at a time in the order they
//! came (a FIFO queue: fair, and nothing to tune), each in the KV cache slot whose tokens
//! it continues with the longest shared prefix, or else in the least recently used slot
//! (see [`Slots::route`]). A job reports back on its channel: started (the
//! request was valid), the stream's chunks, the whole response, or an error. The slot
//! API's actions (`slots.rs`) are jobs of the same queue.

use super::metrics::Metrics;
use super::prefix::{self, Primed};
use super::slots::SlotRequest;
use super::{http, ModelInfo, State};
use crate::api::{
    ApiError, ChatCompletionRequest, ChatRun, CompletionRequest, CompletionRun, EmbeddingRequest,
    Run, RunCore, GPU_LOST,
};
use crate::generate::{GenerateStats, Session, SessionSlot};
use crate::sampler::TokenLogprobs;
use crate::tokenizer::Tokenizer;
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// A request for the model thread.
pub(super) enum Request {
    Chat(ChatCompletionRequest),
    Completion(CompletionRequest),
    Embeddings(EmbeddingRequest),
    Slot(SlotRequest),
}

/// What the model thread says about a job.
pub(super) enum Msg {
    /// The request is valid; chunks (if streamed) and the response follow.
    Started,
    /// A stream chunk's JSON.
    Chunk(String),
    /// The whole response's JSON: the job is done.
    Done(String),
    Failed(ApiError),
}

pub(super) struct Job {
    pub request: Request,
    pub route: &'static str,
    pub reply: UnboundedSender<Msg>,
    pub received: Instant,
    pub deadline: Instant,
}

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
                .send(Msg::Failed(http::unavailable("the server is stopping")));
            continue;
        }
        state.metrics.active.fetch_add(1, Ordering::Relaxed);
        model.answer(job, &state);
        state.metrics.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A checked request, ready to run.
enum Built {
    Chat(ChatRun),
    Completion(CompletionRun),
}

/// The session and its parked KV cache slots.
pub(super) struct Slots {
    pub session: Session,
    reopen: super::Reopen,
    pub parked: Vec<SessionSlot>,
    /// When each cache was last used: the session's, then the parked ones' (0: never).
    pub used: Vec<u64>,
    /// The slot id (`/slots/{id}`) of each cache, in the same order: a slot keeps its id
    /// as its cache moves in and out of the session.
    pub ids: Vec<usize>,
    clock: u64,
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Slots {
    /// `parallel` slots on `session`'s weights, refused before any is allocated when
    /// their caches would not fit the memory available.
    fn new(session: Session, reopen: super::Reopen, parallel: usize) -> crate::Result<Slots> {
        if parallel > 1 {
            let each = session.engine().kv_cache_bytes();
            let need = each.saturating_mul(parallel as u64);
            if let Some(free) = available_memory() {
                if need > free {
                    return Err(crate::Error::InvalidArgument(format!(
                        "--parallel {parallel} needs {} MiB of KV cache ({parallel} × {} MiB \
                         at context {}), but only {} MiB of memory is available: lower \
                         --parallel or --context",
                        need >> 20,
                        each >> 20,
                        session.engine().context(),
                        free >> 20
                    )));
                }
            }
        }
        let parked = (1..parallel)
            .map(|_| session.new_slot())
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Slots {
            session,
            reopen,
            parked,
            used: vec![0; parallel],
            ids: (0..parallel).collect(),
            clock: 0,
        })
    }

    /// Where slot `id`'s cache is: 0 in the session, `i` in `parked[i - 1]`.
    pub fn position(&self, id: usize) -> usize {
        let at = self.ids.iter().position(|&i| i == id);
        at.expect("slot ids are checked against --parallel")
    }

    /// Slot `id` was used now (the least recently used slot is the one evicted).
    pub fn touch(&mut self, id: usize) {
        self.clock += 1;
        let at = self.position(id);
        self.used[at] = self.clock;
    }

    /// Put the slot that suits `prompt` best ([`pick`]) into the session; returns the
    /// prefix they share.
    fn route(&mut self, prompt: &[u32]) -> crate::Result<usize> {
        let caches =
            std::iter::once(self.session.cached()).chain(self.parked.iter().map(|s| s.cached()));
        let i = pick(prompt, caches.zip(self.used.iter().copied()));
        if i > 0 {
            self.session.swap_slot(&mut self.parked[i - 1])?;
            self.used.swap(0, i);
            self.ids.swap(0, i);
        }
        self.clock += 1;
        self.used[0] = self.clock;
        Ok(common_prefix(self.session.cached(), prompt))
    }

    fn answer(&mut self, job: Job, state: &State) {
        let context = self.session.engine().context();
        let tokenizer = self.session.tokenizer();
        let built = match &job.request {
            Request::Chat(req) => match self.session.template() {
                None => Err(ApiError::unsupported(
                    "messages",
                    "the model has no chat template: use /v1/completions",
                )),
                Some(t) => ChatRun::new(req, tokenizer, t, context).map(Built::Chat),
            },
            Request::Completion(req) => {
                CompletionRun::new(req, tokenizer, context).map(Built::Completion)
            }
            Request::Embeddings(req) => return self.embed(req, &job, state),
            Request::Slot(req) => {
                let t0 = Instant::now();
                let dir = state.opts.slot_save_path.as_deref();
                let msg = match self.slot_request(req, dir, state) {
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
        match built {
            Ok(Built::Chat(run)) => {
                let system = match (&job.request, &state.opts.prefix_cache) {
                    (Request::Chat(req), Some(_)) => prefix::system_prefix(
                        req,
                        &self.session,
                        run.prompt(),
                        state.opts.prefix_cache_min_tokens,
                    ),
                    _ => None,
                };
                self.go(run, &job, state, system)
            }
            Ok(Built::Completion(run)) => self.go(run, &job, state, None),
            Err(e) => {
                let _ = job.reply.send(Msg::Failed(e));
            }
        }
    }

    /// Run a valid request to its end, reporting on the job's channel. `system`: the
    /// prompt's first tokens are a system prefix the prefix cache keeps.
    fn go<R>(&mut self, run: R, job: &Job, state: &State, system: Option<usize>)
    where
        R: Run,
        R::Chunk: Serialize,
        R::Response: Serialize,
    {
        let mut prefix = match self.route(run.prompt()) {
            Ok(p) => p,
            Err(e) => {
                let _ = job.reply.send(Msg::Failed(e.into()));
                return;
            }
        };
        let mut primed = Primed::default();
        if let (Some(n), Some(dir)) = (system, &state.opts.prefix_cache) {
            (prefix, primed) = self.use_prefix(dir, run.prompt(), n, prefix, state);
        }
        if state.opts.verbose {
            eprintln!(
                "  {}: {} prompt tokens, {prefix} shared with its slot",
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
        let result = self.session.drive(watched, |chunk| {
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
                let _ = job.reply.send(Msg::Failed(http::unavailable(
                    "the GPU device was lost during generation; the server is loading the \
                     model again: retry the request",
                )));
                self.reload();
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
    fn embed(&mut self, req: &EmbeddingRequest, job: &Job, state: &State) {
        let result = self.session.embeddings(req, &state.opts.model_name);
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
                let _ = job.reply.send(Msg::Failed(http::unavailable(
                    "the GPU device was lost; the server is loading the model again: retry \
                     the request",
                )));
                self.reload();
            }
            // The route logs the error's status.
            Err(e) => {
                let _ = job.reply.send(Msg::Failed(e));
            }
        }
    }

    /// After a lost GPU device: the weights on a new device, the cache refilled with the
    /// tokens it held. A reload that fails is said; the next request fails the same way
    /// (503) and tries again.
    fn reload(&mut self) {
        let t0 = Instant::now();
        match (self.reopen)().and_then(|mut src| self.session.reload(src.as_mut())) {
            Ok(()) => eprintln!(
                "pocketrt serve: model reloaded on a new GPU device in {:.1} s",
                t0.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!("pocketrt serve: reloading the model failed: {e}"),
        }
    }
}

/// Which of the caches (their tokens, when each was last used) a request of `prompt`
/// runs in. A cache whose tokens the prompt mostly continues (at least half of them,
/// llama.cpp's default slot similarity) is taken by the longest shared prefix; else the
/// least recently used one is, so that a new conversation does not evict one that
/// shares only a template header with it.
fn pick<'a>(prompt: &[u32], caches: impl Iterator<Item = (&'a [u32], u64)>) -> usize {
    let score = |cached: &[u32], used: u64| {
        let shared = common_prefix(cached, prompt);
        let continued = if 2 * shared >= cached.len() {
            shared
        } else {
            0
        };
        (continued, u64::MAX - used)
    };
    caches
        .enumerate()
        .max_by_key(|(_, (cached, used))| score(cached, *used))
        .map_or(0, |(i, _)| i)
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("responses serialize")
}

/// One line per generation: route, status, tokens, timings, why it ended.
fn log(job: &Job, stats: &GenerateStats, ended: Instant, gone: bool) {
    let gone = if gone { " (client gone)" } else { "" };
    eprintln!(
        "POST {} 200 {:.0} ms: prompt {} ({} cached, {:.0} tok/s), generated {} ({:.1} tok/s), {:?}{gone}",
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

/// Memory the system can still give (Linux: `MemAvailable`), if known.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn a_request_goes_to_the_cache_it_continues_else_to_the_least_recently_used() {
        let a: Vec<u32> = (50..90).collect();
        let b: Vec<u32> = (0..10).chain(100..140).collect();
        let empty: Vec<u32> = vec![];
        // A's next turn continues cache 1, used before cache 0: not chosen by recency.
        let next_a: Vec<u32> = (50..100).collect();
        let caches = [(b.as_slice(), 5), (a.as_slice(), 3)];
        assert_eq!(pick(&next_a, caches.into_iter()), 1);
        // A new conversation sharing a 10-token header with B (a fifth of it) evicts the
        // least recently used cache (A's), not B's.
        let c: Vec<u32> = (0..10).chain(200..240).collect();
        assert_eq!(pick(&c, caches.into_iter()), 1);
        let caches = [(a.as_slice(), 6), (b.as_slice(), 5)];
        assert_eq!(pick(&c, caches.into_iter()), 1);
        // B's next turn goes back to B's cache.
        let next_b: Vec<u32> = (0..10).chain(100..150).collect();
        assert_eq!(pick(&next_b, caches.into_iter()), 1);
        // An empty cache is free (never used): taken before evicting anything, but a
        // continued prefix wins over it.
        let caches = [(a.as_slice(), 3), (empty.as_slice(), 0), (b.as_slice(), 5)];
        assert_eq!(pick(&c, caches.into_iter()), 1);
        assert_eq!(pick(&next_a, caches.into_iter()), 0);
    }
}
