// Types of the OpenAI-shaped API (`model.chat.completions.create`, `model.completions.create`).
// Field names and shapes follow OpenAI's chat-completions and completions references, so
// that code written for the OpenAI SDK, WebLLM or wllama moves over unchanged; the
// pocketrt extensions are marked.

export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface TextPart {
  type: 'text';
  text: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatCompletionMessageParam {
  role: Role;
  content: string | TextPart[] | null;
  name?: string;
  /** An assistant turn's earlier tool calls. */
  tool_calls?: ToolCall[];
  /** A tool result's call. */
  tool_call_id?: string;
  /** An assistant turn's thinking (kept where the template shows it). */
  reasoning_content?: string;
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** The sampling and stopping fields the chat and text endpoints share. */
export interface SamplingParams {
  model?: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  /** 0 (default 1 like OpenAI's): greedy. */
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  /** Only 1. */
  n?: number | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  /** Token id (as a string) → bias in [-100, 100]. */
  logit_bias?: Record<string, number> | null;
  /** pocketrt extensions (as llama.cpp, vLLM and WebLLM name them). */
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  /** Tokens the penalties look back over (default 64). */
  repeat_last_n?: number | null;
  /** A request longer than the context: an error (default), or drop the oldest turns. */
  context_overflow?: 'error' | 'truncate';
  /** Structured output: JSON (any object, or valid under the schema). A schema the
   * runtime cannot compile is a 400 error with `param` naming it, before any token. */
  response_format?: ResponseFormat | null;
  /** pocketrt extension: the output matches a Lark grammar (llguidance's dialect) or a
   * regular expression. Not together with a JSON `response_format`. */
  grammar?: Grammar | null;
}

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      json_schema: { name?: string; description?: string; schema?: Record<string, unknown> | boolean; strict?: boolean | null };
    };

export interface Grammar {
  type: 'lark' | 'regex';
  value: string;
}

export interface ChatCompletionCreateParams extends SamplingParams {
  messages: ChatCompletionMessageParam[];
  max_completion_tokens?: number | null;
  logprobs?: boolean | null;
  /** 0 to 20 alternatives per token (with `logprobs`). */
  top_logprobs?: number | null;
  tools?: FunctionTool[];
  tool_choice?: ToolChoice;
  /** The chat template's variables, e.g. `{ enable_thinking: false }`. */
  chat_template_kwargs?: Record<string, unknown>;
}

export interface CompletionCreateParams extends SamplingParams {
  /** Text, or token ids. */
  prompt: string | number[];
  /** 0 to 5 alternatives per token. */
  logprobs?: number | null;
  echo?: boolean | null;
}

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens`: prompt tokens whose KV the cache already held. */
  prompt_tokens_details?: { cached_tokens?: number };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface ChatCompletionMessage {
  role: 'assistant';
  content: string | null;
  refusal: null;
  /** The model's thinking (Qwen3 `<think>…</think>`), never mixed into `content`. */
  reasoning_content?: string | null;
  tool_calls?: ToolCall[];
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: ChatCompletionMessage;
    finish_reason: FinishReason;
    logprobs: { content: TokenLogprob[] | null; refusal: null } | null;
  }>;
  usage?: Usage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: {
      role?: 'assistant';
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: Array<{
        index: number;
        id?: string;
        type?: 'function';
        function?: { name?: string; arguments?: string };
      }>;
    };
    finish_reason: FinishReason | null;
    logprobs?: { content: TokenLogprob[] | null; refusal: null } | null;
  }>;
  /** On the last chunk with `stream_options.include_usage` (its `choices` is empty). */
  usage?: Usage | null;
}

/** A completion, and (with `stream: true`) each of its chunks. */
export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    text: string;
    finish_reason: 'stop' | 'length' | 'content_filter';
    logprobs: {
      tokens?: string[];
      token_logprobs?: number[];
      top_logprobs?: Array<Record<string, number>>;
      text_offset?: number[];
    } | null;
  }>;
  usage?: Usage;
}

export interface RequestOptions {
  /** Aborts the completion (the promise or the stream rejects with code ABORTED). */
  signal?: AbortSignal;
}

/** An error of a request, in OpenAI's shape. */
export interface ApiError extends Error {
  code: string;
  status: number;
  type: string;
  param: string | null;
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface ChatCompletions {
  create(request: ChatCompletionCreateParams & { stream: true }, options?: RequestOptions): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(request: ChatCompletionCreateParams & { stream?: false | null }, options?: RequestOptions): Promise<ChatCompletion>;
  create(request: ChatCompletionCreateParams, options?: RequestOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
}

export interface Completions {
  create(request: CompletionCreateParams & { stream: true }, options?: RequestOptions): Promise<AsyncIterable<Completion>>;
  create(request: CompletionCreateParams & { stream?: false | null }, options?: RequestOptions): Promise<Completion>;
  create(request: CompletionCreateParams, options?: RequestOptions): Promise<Completion | AsyncIterable<Completion>>;
}

export interface EmbeddingCreateParams {
  /** A text, texts, token ids, or lists of token ids. */
  input: string | string[] | number[] | number[][];
  model?: string;
  /** "float" (the default) or "base64" (little-endian f32, as OpenAI's). */
  encoding_format?: 'float' | 'base64';
  /** Keep the first N values, normalised again (Matryoshka truncation). */
  dimensions?: number;
  /** pocketrt's extension: how token states become one vector (default: last). */
  pooling?: 'last' | 'mean' | 'cls';
  user?: string;
}

export interface Embedding<T = number[]> {
  object: 'embedding';
  index: number;
  /** The L2-normalised vector (its base64 with encoding_format "base64"). */
  embedding: T;
}

export interface CreateEmbeddingResponse<T = number[]> {
  object: 'list';
  data: Embedding<T>[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

export interface Embeddings {
  create(request: EmbeddingCreateParams & { encoding_format: 'base64' }): Promise<CreateEmbeddingResponse<string>>;
  create(request: EmbeddingCreateParams & { encoding_format?: 'float' }): Promise<CreateEmbeddingResponse>;
}
