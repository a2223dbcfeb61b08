//! `pocketrt serve`: the OpenAI-compatible HTTP server (native only), on axum and tokio.
//!
//! - `http.rs`: the routes (`/v1/chat/completions`, `/v1/completions`, `/v1/models`,
//!   `/health`, `/metrics`), the API key, CORS, the body limit, errors in OpenAI's shape,
//!   and Server-Sent Events exactly as OpenAI streams them.
//! - `worker.rs`: the model on its own thread. Requests queue first come first served;
//!   each runs through the one protocol module ([`crate::api`]) on a [`Session`], in the
//!   KV cache slot (of `--parallel N`) that shares the longest prefix with it. A client
//!   that goes away (or times out) stops its generation at the next token. A request's
//!   `"speculative"` is resolved against `--spec` ([`ServeOptions::speculative`]).
//! - `slots.rs`: llama.cpp's slot API (`--slot-save-path DIR`: `GET /slots`,
//!   `POST /slots/{id}?action=save|restore|erase`): a KV cache slot to a session
//!   snapshot file and back ([`crate::session`]), as a job on the model thread's queue.
//! - `prefix.rs`: `--prefix-cache DIR`: snapshots of long system prompts, kept across
//!   restarts and restored into a slot that does not hold its request's system prefix.
//! - `metrics.rs`: the Prometheus counters of `/metrics`.
//!
//! The socket is bound first and the model loaded after, so `/health` answers 503 while
//! it loads and 200 once it is ready. Ctrl-C (or SIGTERM) ends the in-flight generations
//! at their next token, lets their responses finish, and returns.

mod errors;
mod http;
mod job;
mod metrics;
mod prefix;
mod slots;
mod worker;

use crate::api::ApiError;
use crate::error::{Error, Result};
use crate::generate::Session;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How `pocketrt serve` listens and schedules.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Address to bind (127.0.0.1 by default: only this machine can connect).
    pub host: String,
    /// Port (0: any free port; the bound address is printed).
    pub port: u16,
    /// Required as `Authorization: Bearer KEY` on `/v1/*` and `/metrics`.
    pub api_key: Option<String>,
    /// Browser origins allowed by CORS (`*` for any); none: no CORS headers at all.
    pub cors: Vec<String>,
    /// KV cache slots: conversations kept on one copy of the weights.
    pub parallel: usize,
    /// Longest a request may take, queue time included.
    pub timeout: Duration,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// The model id `/v1/models` reports.
    pub model_name: String,
    /// Log more (the backend, each request's slot and prompt).
    pub verbose: bool,
    /// `--slot-save-path`: the folder the slot API saves slots to and restores them from
    /// (none: the slot API answers 501, as llama.cpp's does).
    pub slot_save_path: Option<PathBuf>,
    /// `--prefix-cache`: the folder of system-prompt snapshots (none: no prefix cache).
    pub prefix_cache: Option<PathBuf>,
    /// The shortest system prefix, in tokens, the prefix cache keeps.
    pub prefix_cache_min_tokens: usize,
    /// `--spec`: the speculative decoding of requests that do not say (`None`: off;
    /// a draft model is the loaded session's, [`Session::set_draft`]). A request's
    /// `"speculative"` overrides it ([`crate::api::RunCore::apply_speculation`]).
    pub speculative: Option<crate::speculate::SpecOptions>,
}

/// Loads the model (on the model thread, after the socket is bound): its session, and
/// how to open its source again when a lost GPU device makes the worker reload it.
pub type Loader = Box<dyn FnOnce() -> Result<(Session, Reopen)> + Send>;

/// Opens the model's source again (for [`Session::reload`]).
pub type Reopen = Box<dyn FnMut() -> Result<Box<dyn crate::format::ModelSource>> + Send>;

/// The loaded model as `/v1/models` describes it.
#[derive(Clone, Debug)]
struct ModelInfo {
    context: usize,
    backend: String,
    created: u64,
}

/// What the routes and the model thread share.
struct State {
    opts: ServeOptions,
    /// Set once the model is loaded.
    model: OnceLock<ModelInfo>,
    /// The model thread's queue.
    jobs: Mutex<std::sync::mpsc::Sender<job::Job>>,
    metrics: metrics::Metrics,
    /// Ctrl-C was pressed (or the load failed): generations stop, new ones are refused.
    stopping: AtomicBool,
    stop: tokio::sync::Notify,
    /// Why the model could not be loaded.
    failed: Mutex<Option<Error>>,
}

impl State {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// The load failed: the server stops with `e`.
    fn fail(&self, e: Error) {
        *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        self.stopping.store(true, Ordering::Relaxed);
        self.stop.notify_one();
    }

    /// Hand `job` to the model thread (counted as queued until it starts).
    fn enqueue(&self, job: job::Job) -> std::result::Result<(), ApiError> {
        self.metrics.queued.fetch_add(1, Ordering::Relaxed);
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job);
        sent.map_err(|_| {
            self.metrics.queued.fetch_sub(1, Ordering::Relaxed);
            errors::unavailable("the model thread has stopped")
        })
    }
}

/// Serve until Ctrl-C: bind `opts.host:opts.port`, load the model with `load` on the
/// model thread, answer requests. Returns when stopped (or the load failed: its error).
pub fn serve(opts: ServeOptions, load: Loader) -> Result<()> {
    let addr = format!("{}:{}", opts.host, opts.port);
    let io = |source| Error::Io {
        path: addr.clone().into(),
        source,
    };
    if opts.parallel == 0 {
        return Err(Error::InvalidArgument(
            "--parallel must be at least 1".into(),
        ));
    }
    for dir in opts.slot_save_path.iter().chain(&opts.prefix_cache) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(io)?;
        let bound = listener.local_addr().map_err(io)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let state = Arc::new(State {
            opts,
            model: OnceLock::new(),
            jobs: Mutex::new(tx),
            metrics: metrics::Metrics::default(),
            stopping: AtomicBool::new(false),
            stop: tokio::sync::Notify::new(),
            failed: Mutex::new(None),
        });
        eprintln!("pocketrt serve: listening on http://{bound} (loading the model)");
        let st = state.clone();
        let model_thread = std::thread::Builder::new()
            .name("pocketrt-model".into())
            .spawn(move || worker::run(st, load, rx))
            .map_err(io)?;
        let app = http::router(state.clone());
        let shutdown = stopped(state.clone());
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(io);
        state.stopping.store(true, Ordering::Relaxed);
        let _ = model_thread.join();
        if let Some(e) = state
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(e);
        }
        eprintln!("pocketrt serve: stopped");
        served
    })
}

/// Resolves on Ctrl-C, SIGTERM or a failed load; generations stop from then on.
async fn stopped(state: Arc<State>) {
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => eprintln!("pocketrt serve: stopping (in-flight requests end now)"),
        _ = term => eprintln!("pocketrt serve: terminated (in-flight requests end now)"),
        _ = state.stop.notified() => {}
    }
    state.stopping.store(true, Ordering::Relaxed);
}
