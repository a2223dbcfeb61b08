// The OpenAI-shaped API of a loaded model: `chat.completions.create(request, { signal })`,
// `completions.create(...)` and `embeddings.create(...)`, as the OpenAI SDK, WebLLM and
// wllama offer it. The
// request, its validation and every response / chunk object come from the crate's `api`
// module (the same code the native runtime runs); this file only moves JSON and turns a
// stream of chunks into an async iterable.

/** An `Error` in OpenAI's shape: `error` is `{message, type, param, code}`, `status` the
 * HTTP status a server would send, and `code` the package's error code. */
export function apiError(e) {
  const body = e?.openai;
  if (!body) return e;
  const err = new Error(body.error.message);
  err.code = e.code ?? 'INVALID_ARGUMENT';
  err.status = e.status ?? 400;
  err.error = body.error;
  err.type = body.error.type;
  err.param = body.error.param;
  return err;
}

/**
 * `create(request, { signal })` of one endpoint (`kind`: "chat" or "text") on a runner:
 * `begin(requestJson, kind)` (a Promise, resolved once the prompt is processed),
 * `next()` (a Promise of the next chunk's JSON, or null at the end), `result()` (the
 * whole response's JSON), `stop()`, and optionally `done()` (awaited once the reply is
 * complete, before the stream ends or the response returns).
 */
export function endpoint(runner, kind) {
  return {
    async create(request, options = {}) {
      const signal = options.signal ?? null;
      signal?.throwIfAborted?.();
      if (request === null || typeof request !== 'object') {
        throw apiError({ openai: { error: { message: 'the request must be an object', type: 'invalid_request_error', param: null, code: null } } });
      }
      const { signal: _ignored, ...body } = request;
      try {
        await runner.begin(JSON.stringify(body), kind);
      } catch (e) {
        throw apiError(e);
      }
      const chunks = stream(runner, signal);
      if (body.stream) return chunks;
      for await (const _ of chunks) {
        // the response is assembled on the Rust side
      }
      return JSON.parse(runner.result());
    },
  };
}

/**
 * `embeddings.create(request)` on `run(requestJson)` (a Promise of the response's JSON):
 * OpenAI's embeddings response, `{object: "list", data: [{object: "embedding", index,
 * embedding}], model, usage}` (`encoding_format: "base64"`: each embedding a base64
 * string of little-endian f32, as OpenAI's; "float" is the default here).
 */
export function embeddingsEndpoint(run) {
  return {
    async create(request) {
      if (request === null || typeof request !== 'object') {
        throw apiError({ openai: { error: { message: 'the request must be an object', type: 'invalid_request_error', param: null, code: null } } });
      }
      try {
        return JSON.parse(await run(JSON.stringify(request)));
      } catch (e) {
        throw apiError(e);
      }
    },
  };
}

/** The running completion's chunks; an abort, an early `break` or an error stops it. */
async function* stream(runner, signal) {
  let done = false;
  try {
    for (;;) {
      if (signal?.aborted) {
        const e = new Error('the completion was aborted');
        e.code = 'ABORTED';
        e.name = 'AbortError';
        throw e;
      }
      const chunk = await runner.next();
      if (chunk == null) {
        done = true;
        await runner.done?.(); // the reply is complete (autoSave)
        return;
      }
      yield JSON.parse(chunk);
    }
  } catch (e) {
    throw apiError(e);
  } finally {
    if (!done) {
      try {
        runner.stop();
      } catch {
        // unloaded or busy: nothing to stop
      }
    }
  }
}
