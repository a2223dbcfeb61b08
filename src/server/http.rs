//! The routes: the two generation endpoints (a JSON response, or Server-Sent Events as
//! OpenAI sends them: `data: {chunk}\n\n` … `data: [DONE]\n\n`), `/v1/embeddings`
//! (JSON), `/v1/models`, `/health`,
//! `/metrics`, the slot API (`GET /slots`, `POST /slots/{id}?action=...`: `slots.rs`);
//! the API key, CORS, the body limit and the per-request timeout; every error in
//! OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`) with its HTTP
//! status; one log line per request.

use super::errors::{api_error, not_supported, status, timed_out, unavailable};
use super::job::{Job, Msg, Request};
use super::slots::SlotRequest;
use super::State;
use crate::api::{ApiError, ChatCompletionRequest, CompletionRequest, EmbeddingRequest};
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State as With};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;
use tokio::time::timeout_at;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";
const EMBEDDINGS: &str = "/v1/embeddings";
const MODELS: &str = "/v1/models";
const SLOTS: &str = "/slots";

/// A generation response whose log line the model thread writes (with its tokens).
#[derive(Clone, Copy)]
struct LoggedByWorker;

pub(super) fn router(state: Arc<State>) -> Router {
    let guarded = Router::new()
        .route(CHAT, post(chat))
        .route(COMPLETIONS, post(completions))
        .route(EMBEDDINGS, post(embeddings))
        .route(MODELS, get(models))
        .route("/metrics", get(metrics))
        .route(SLOTS, get(slot_list))
        .route("/slots/{id}", post(slot_action))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    let app = Router::new()
        .merge(guarded)
        .route("/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.opts.body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), log_request))
        .with_state(state.clone());
    match cors(&state.opts.cors) {
        Some(layer) => app.layer(layer),
        None => app,
    }
}

/// `--cors ORIGIN...`: those origins (or `*`: any) may call the API from a page; the
/// preflight is answered before the API key is checked (browsers send none with it).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers(AllowHeaders::mirror_request()),
    )
}

/// An error response, with its status ([`status`]).
fn error_response(e: ApiError) -> Response {
    json_response(status(&e), e.to_json())
}

fn json_response(status: StatusCode, json: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], json).into_response()
}

async fn not_found(method: Method, uri: axum::http::Uri) -> Response {
    error_response(api_error(
        "invalid_request_error",
        "unknown_url",
        format!("Unknown request URL: {method} {}.", uri.path()),
    ))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Response {
    error_response(api_error(
        "invalid_request_error",
        "method_not_allowed",
        format!("{method} is not allowed on {}.", uri.path()),
    ))
}

/// `--api-key`: `Authorization: Bearer KEY` or 401.
async fn auth(With(st): With<Arc<State>>, req: axum::extract::Request, next: Next) -> Response {
    let Some(key) = &st.opts.api_key else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if g.trim() == key => next.run(req).await,
        Some(_) => error_response(api_error(
            "invalid_request_error",
            "invalid_api_key",
            "Incorrect API key provided.",
        )),
        None => error_response(api_error(
            "invalid_request_error",
            "invalid_api_key",
            "You didn't provide an API key: send it as 'Authorization: Bearer KEY'.",
        )),
    }
}

/// The route's name for the metrics (unknown paths are one label).
fn route_label(path: &str) -> &'static str {
    match path {
        CHAT => CHAT,
        COMPLETIONS => COMPLETIONS,
        EMBEDDINGS => EMBEDDINGS,
        MODELS => MODELS,
        "/health" => "/health",
        "/metrics" => "/metrics",
        p if p == SLOTS || p.starts_with("/slots/") => SLOTS,
        _ => "other",
    }
}

/// Counts every request; logs one line for each, but for generations, whose line the
/// model thread writes when they end.
async fn log_request(
    With(st): With<Arc<State>>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    let (method, path, t0) = (
        req.method().clone(),
        req.uri().path().to_string(),
        Instant::now(),
    );
    let resp = next.run(req).await;
    st.metrics
        .request(route_label(&path), resp.status().as_u16());
    if resp.extensions().get::<LoggedByWorker>().is_none() {
        eprintln!(
            "{method} {path} {} {:.0} ms",
            resp.status().as_u16(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    resp
}

async fn health(With(st): With<Arc<State>>) -> Response {
    if st.model.get().is_some() {
        json_response(StatusCode::OK, r#"{"status":"ok"}"#.into())
    } else {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"status":"loading"}"#.into(),
        )
    }
}

async fn models(With(st): With<Arc<State>>) -> Response {
    let Some(info) = st.model.get() else {
        return error_response(unavailable("the model is loading"));
    };
    let doc = serde_json::json!({
        "object": "list",
        "data": [{
            "id": st.opts.model_name,
            "object": "model",
            "created": info.created,
            "owned_by": "pocketrt",
            "context_length": info.context,
            "backend": info.backend,
            "kv_slots": st.opts.parallel,
        }]
    });
    json_response(StatusCode::OK, doc.to_string())
}

async fn metrics(With(st): With<Arc<State>>) -> Response {
    let text = st.metrics.render(st.opts.parallel);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The body as text: 413 past the limit, 400 when it is not UTF-8.
fn body_text(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<String, ApiError> {
    let bytes = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            api_error(
                "invalid_request_error",
                "request_too_large",
                format!("The request body is larger than this server's limit of {limit} bytes."),
            )
        } else {
            ApiError::malformed(format!(
                "The request body could not be read: {}",
                r.body_text()
            ))
        }
    })?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::malformed("The request body is not valid UTF-8 JSON"))
}

async fn chat(With(st): With<Arc<State>>, body: Result<Bytes, BytesRejection>) -> Response {
    let parsed =
        body_text(body, st.opts.body_limit).and_then(|t| ChatCompletionRequest::from_json(&t));
    match parsed {
        Ok(req) => {
            let stream = req.params.stream == Some(true);
            generate(st, Request::Chat(req), CHAT, stream).await
        }
        Err(e) => error_response(e),
    }
}

async fn completions(With(st): With<Arc<State>>, body: Result<Bytes, BytesRejection>) -> Response {
    let parsed = body_text(body, st.opts.body_limit).and_then(|t| CompletionRequest::from_json(&t));
    match parsed {
        Ok(req) => {
            let stream = req.params.stream == Some(true);
            generate(st, Request::Completion(req), COMPLETIONS, stream).await
        }
        Err(e) => error_response(e),
    }
}

/// `POST /v1/embeddings`: a job on the model thread's queue like a generation's.
async fn embeddings(With(st): With<Arc<State>>, body: Result<Bytes, BytesRejection>) -> Response {
    let parsed = body_text(body, st.opts.body_limit).and_then(|t| EmbeddingRequest::from_json(&t));
    match parsed {
        Ok(req) => generate(st, Request::Embeddings(req), EMBEDDINGS, false).await,
        Err(e) => error_response(e),
    }
}

/// `GET /slots`: each KV cache slot's id, context and the tokens it holds.
async fn slot_list(With(st): With<Arc<State>>) -> Response {
    generate(st, Request::Slot(SlotRequest::List), SLOTS, false).await
}

/// `POST /slots/{id}?action=save|restore|erase` (`slots.rs`): checked here, run on the
/// model thread's queue; 501 without `--slot-save-path`, as llama.cpp answers.
async fn slot_action(
    With(st): With<Arc<State>>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if st.opts.slot_save_path.is_none() {
        return error_response(not_supported());
    }
    let action = query.get("action").map(String::as_str);
    let parsed = body_text(body, st.opts.body_limit)
        .and_then(|t| SlotRequest::parse(&id, action, &t, st.opts.parallel));
    match parsed {
        Ok(req) => generate(st, Request::Slot(req), SLOTS, false).await,
        Err(e) => error_response(e),
    }
}

/// Queue `request` for the model thread and answer with what it reports.
async fn generate(st: Arc<State>, request: Request, route: &'static str, stream: bool) -> Response {
    if st.model.get().is_none() {
        return error_response(unavailable("the model is loading"));
    }
    if st.stopping() {
        return error_response(unavailable("the server is stopping"));
    }
    let (reply, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let received = Instant::now();
    let deadline = received + st.opts.timeout;
    let job = Job {
        request,
        route,
        reply,
        received,
        deadline,
    };
    if let Err(e) = st.enqueue(job) {
        return error_response(e);
    }
    let deadline = tokio::time::Instant::from_std(deadline);
    // Dropping `rx` (a timeout here, or the client going away) cancels the job.
    loop {
        match timeout_at(deadline, rx.recv()).await {
            Err(_) => return error_response(timed_out(st.opts.timeout)),
            // The model thread drops a job whose time ran out while it queued.
            Ok(None) if tokio::time::Instant::now() >= deadline => {
                return error_response(timed_out(st.opts.timeout))
            }
            Ok(None) => return error_response(unavailable("the model thread has stopped")),
            Ok(Some(Msg::Failed(e))) => return error_response(e),
            Ok(Some(Msg::Started)) if stream => break,
            Ok(Some(Msg::Done(json))) => {
                let mut resp = json_response(StatusCode::OK, json);
                resp.extensions_mut().insert(LoggedByWorker);
                return resp;
            }
            Ok(Some(_)) => {}
        }
    }
    let timeout = timed_out(st.opts.timeout);
    let body = futures_util::stream::unfold(Some(rx), move |rx| {
        let timeout = timeout.clone();
        async move {
            let mut rx = rx?;
            let (event, more) = match timeout_at(deadline, rx.recv()).await {
                Ok(Some(Msg::Chunk(json))) => (format!("data: {json}\n\n"), true),
                Ok(Some(Msg::Done(_))) => ("data: [DONE]\n\n".to_string(), false),
                Ok(Some(Msg::Failed(e))) => (format!("data: {}\n\n", e.to_json()), false),
                Ok(Some(Msg::Started)) => (String::new(), true),
                Ok(None) => return None,
                Err(_) => (format!("data: {}\n\n", timeout.to_json()), false),
            };
            Some((Ok::<_, Infallible>(Bytes::from(event)), more.then_some(rx)))
        }
    });
    let mut resp = (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response();
    resp.extensions_mut().insert(LoggedByWorker);
    resp
}
