//! `fetch`, streamed response bodies and Cache Storage, from Rust. Works in a page and in
//! a Worker (only globals both have are used).

use super::errors::from_js;
use crate::error::{Error, Result};
use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortSignal, Cache, CacheStorage, ReadableStreamDefaultReader, Request, RequestInit, Response,
};

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (Window and WorkerGlobalScope both have it).
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(input: &Request) -> Promise;
}

/// Largest piece of a body chunk copied into wasm memory at once.
const PIECE: u32 = 1 << 20;

/// `Err(Aborted)` once `signal` has fired.
pub fn check_abort(signal: Option<&AbortSignal>) -> Result<()> {
    match signal {
        Some(s) if s.aborted() => Err(Error::Aborted),
        _ => Ok(()),
    }
}

/// GET `url`; a non-2xx status is an error naming it.
pub async fn get(url: &str, signal: Option<&AbortSignal>) -> Result<Response> {
    get_range(url, None, signal).await
}

/// GET bytes `range` (start, inclusive end) of `url` — or all of it: a server may ignore
/// the range and answer 200 with the whole body (callers check `status()`).
pub async fn get_range(
    url: &str,
    range: Option<(u64, u64)>,
    signal: Option<&AbortSignal>,
) -> Result<Response> {
    check_abort(signal)?;
    let init = RequestInit::new();
    init.set_method("GET");
    if let Some(s) = signal {
        init.set_signal(Some(s));
    }
    if let Some((start, end)) = range {
        let headers = web_sys::Headers::new().map_err(|e| from_js(url, e))?;
        headers
            .set("Range", &format!("bytes={start}-{end}"))
            .map_err(|e| from_js(url, e))?;
        init.set_headers(&headers);
    }
    let request = Request::new_with_str_and_init(url, &init).map_err(|e| from_js(url, e))?;
    let response: Response = JsFuture::from(global_fetch(&request))
        .await
        .map_err(|e| from_js(url, e))?
        .unchecked_into();
    if !response.ok() {
        return Err(Error::Fetch {
            url: url.to_string(),
            detail: format!("HTTP {} {}", response.status(), response.status_text()),
        });
    }
    Ok(response)
}

/// The body of `response` as text.
pub async fn text(url: &str, response: &Response) -> Result<String> {
    let promise = response.text().map_err(|e| from_js(url, e))?;
    let v = JsFuture::from(promise).await.map_err(|e| from_js(url, e))?;
    v.as_string().ok_or_else(|| Error::Fetch {
        url: url.to_string(),
        detail: "the body is not text".into(),
    })
}

/// Stream the body of `response` to `sink` in pieces of at most 1 MiB, copied into one
/// reused buffer (the wasm heap holds one piece at a time).
pub async fn stream_body(
    url: &str,
    response: &Response,
    signal: Option<&AbortSignal>,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut body = Body::new(url, response)?;
    let result = async {
        while let Some(bytes) = body.next(signal).await? {
            sink(bytes)?;
        }
        Ok(())
    }
    .await;
    if result.is_err() {
        body.cancel();
    }
    result
}

/// A response body read piece by piece (at most 1 MiB each, copied into one reused
/// buffer): for consumers that must `await` between pieces.
pub struct Body {
    url: String,
    reader: ReadableStreamDefaultReader,
    /// The stream chunk being handed out, and how much of it was.
    chunk: Option<(Uint8Array, u32)>,
    buf: Vec<u8>,
}

impl Body {
    pub fn new(url: &str, response: &Response) -> Result<Body> {
        let body = response.body().ok_or_else(|| Error::Fetch {
            url: url.to_string(),
            detail: "the response has no body".into(),
        })?;
        Ok(Body {
            url: url.to_string(),
            reader: body.get_reader().unchecked_into(),
            chunk: None,
            buf: Vec::new(),
        })
    }

    /// The next piece of the body; `None` at its end.
    pub async fn next(&mut self, signal: Option<&AbortSignal>) -> Result<Option<&[u8]>> {
        check_abort(signal)?;
        let url = self.url.as_str();
        let (value, at) = match self.chunk.take() {
            Some(c) => c,
            None => loop {
                let next = JsFuture::from(self.reader.read())
                    .await
                    .map_err(|e| from_js(url, e))?;
                let done = Reflect::get(&next, &"done".into()).map_err(|e| from_js(url, e))?;
                if done.as_bool().unwrap_or(false) {
                    return Ok(None);
                }
                let value: Uint8Array = Reflect::get(&next, &"value".into())
                    .map_err(|e| from_js(url, e))?
                    .unchecked_into();
                if value.length() > 0 {
                    break (value, 0);
                }
            },
        };
        let end = (at + PIECE).min(value.length());
        self.buf.resize((end - at) as usize, 0);
        value.subarray(at, end).copy_to(&mut self.buf);
        if end < value.length() {
            self.chunk = Some((value, end));
        }
        Ok(Some(&self.buf))
    }

    /// Stop reading (the rest of the body is not needed).
    pub fn cancel(&self) {
        let _ = self.reader.cancel();
    }
}

/// Cache Storage name of the shards (bump when the cached bytes change meaning).
pub const CACHE_NAME: &str = "pocketrt-v1";

/// The `pocketrt-…` cache, or `None` where Cache Storage is unavailable (an insecure
/// origin, or a browser without it): loads then always use the network.
pub async fn open_cache(name: &str) -> Option<Cache> {
    let caches = Reflect::get(&js_sys::global(), &"caches".into()).ok()?;
    let caches: CacheStorage = caches.dyn_into().ok()?;
    let cache = JsFuture::from(caches.open(name)).await.ok()?;
    cache.dyn_into().ok()
}

/// The cached response for `url`, if any.
pub async fn cached(cache: &Cache, url: &str) -> Option<Response> {
    let v = JsFuture::from(cache.match_with_str(url)).await.ok()?;
    v.dyn_into().ok()
}

/// Store `response` for `url`; a failure (quota) is the browser's message.
pub async fn store(cache: &Cache, url: &str, response: &Response) -> Result<(), String> {
    match JsFuture::from(cache.put_with_str(url, response)).await {
        Ok(_) => Ok(()),
        Err(e) => Err(match e.dyn_ref::<js_sys::Error>() {
            Some(err) => format!(
                "{}: {}",
                String::from(err.name()),
                String::from(err.message())
            ),
            None => e.as_string().unwrap_or_else(|| format!("{e:?}")),
        }),
    }
}

/// Remove `url` from the cache (a corrupt entry).
pub async fn evict(cache: &Cache, url: &str) {
    let _ = JsFuture::from(cache.delete_with_str(url)).await;
}
