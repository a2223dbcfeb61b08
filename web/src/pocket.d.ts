// Types of the pocketrt npm package.
import type { ChatCompletions, Completions, Embeddings } from './completions.js';
import type { AutoSaveEvent, SessionRestoreResult, Sessions } from './sessions.js';
export type * from './completions.js';
export type * from './sessions.js';

/** Error codes: NO_WEBGPU, NETWORK, BAD_MANIFEST, BAD_MODEL, SHARD_HASH, SHARD_SIZE,
 * UNSUPPORTED, TOKENIZER, CHAT_TEMPLATE, INVALID_ARGUMENT, GPU, GPU_LIMITS, GPU_LOST,
 * CONTEXT_FULL, QUOTA, NOT_CACHED, SESSION_MISMATCH, SESSION_CORRUPT, SESSION_NOT_FOUND,
 * IO, ABORTED, BUSY, UNLOADED, WORKER, HOST_LOST, INTERNAL. */
export interface PocketError extends Error {
  code: string;
}

export interface LoadProgress {
  /** "manifest" (or a GGUF's header), "cache" (a shard / GGUF piece from Cache Storage),
   * "download", "cache-error" (a file could not be stored in Cache Storage: `message`
   * says why; the load goes on), "tokenizer", "tuning" (the on-device tuner timing its
   * designs: a first load on a real GPU, about 2 s), "ready". */
  phase: string;
  /** Shard bytes loaded so far / in all. */
  loaded: number;
  total: number;
  /** The shard this event is about, if any. */
  shard: number | null;
  shards: number;
  message: string | null;
}

export interface LoadOptions {
  onProgress?: (event: LoadProgress) => void;
  signal?: AbortSignal;
  /** KV cache positions (default: min(4096, the model's)). */
  contextLength?: number;
  /** Shards fetched at once (default 4). */
  parallel?: number;
  /** false: do not use Cache Storage. */
  cache?: boolean;
  /** Local package files: file name → (blob) URL; the model URL is then only a label. */
  files?: Record<string, string>;
  /** The model hub asked for `owner/name` ids (default https://huggingface.co). */
  hubEndpoint?: string;
  /** The URL relative model URLs resolve against (default: the page's). */
  baseUrl?: string;
  /** Where pocketrt_bg.wasm is (default: next to the module). */
  wasmUrl?: string | URL;
  /** "auto" (default): WebGPU on a real GPU; the CPU backend without WebGPU or an
   * adapter; on a software adapter (SwiftShader, …) the faster of the two, measured. */
  backend?: 'webgpu' | 'cpu' | 'auto';
  /** The WebGPU device profile (the kernel designs), forced instead of detected from the
   * adapter: "gpu" (real GPUs), "gpu-subgroups" (real GPUs with one fixed subgroup width;
   * wgpu's WebGPU backend exposes no subgroups, so browsers refuse it for now), "lavapipe"
   * (CPU adapters with 8-wide subgroups),
   * "swiftshader" (other CPU adapters). An unknown name, or a profile the adapter cannot
   * run, fails with code INVALID_ARGUMENT saying why. The CPU backend ignores it. */
  profile?: ProfileName;
  /** The on-device tuner: on the first load of a model on a real GPU (a "gpu" profile on
   * a hardware adapter), about 2 s of the load ("tuning" progress phase) timing the
   * profile's free constants (GEMV rows, head rows, attention split, W_o fold) on the
   * model's own weights; the fastest is kept in Cache Storage and later loads apply it
   * at once. undefined / "auto": so (not with `cache: false`, where nothing could be
   * kept); false / "off": never;
   * true / "on": also a GPU profile forced on a software adapter; "force": sweep again.
   * `info.tuned` and the end of `info.backendReason` say what it chose. */
  tune?: boolean | 'auto' | 'on' | 'off' | 'force';
  /** How a GGUF URL's matrices are held on the GPU: "keep" (default: as their author
   * quantized them — Q4_0/Q4_1 as Q4 g64, the rest, Q8_0 exactly, as Q8 g32), "q4" (all
   * Q4 g64: half the memory of Q8) or "q8". Packages run as they are stored. */
  weights?: 'keep' | 'q4' | 'q8';
  /** The CPU backend's threads (1 to 64; default: the cores, at most 8). More than one
   * needs a Worker of a cross-origin-isolated page with shared WebAssembly.Memory, else
   * the load runs on one thread (`info.threadsReason` says why). Only loads sure to run on
   * the CPU backend (backend "cpu", or "auto" without WebGPU) use threads. The first
   * threaded load in a page or Worker fixes the count. */
  threads?: number;
  /** Where threads/pocketrt_bg.wasm (the threaded build) is (default: next to its module). */
  threadedWasmUrl?: string | URL;
  /** The context policy of `chat.completions` / `completions` requests that set no
   * `context_overflow`: "error" (default) or "truncate" (drop the oldest turns). */
  contextOverflow?: 'error' | 'truncate';
  /** true: make no request at all — every file (hub listing, manifest, tokenizer, shards)
   * must be cached, else NOT_CACHED. By default (false) a failed request falls back to the
   * cached copy. `info.source` says where the model came from. */
  offline?: boolean;
  /** A model whose missing shards exceed the storage quota left: "error" (default) fails
   * with QUOTA before downloading; "uncached" loads it without caching (`info.uncached`). */
  overQuota?: 'error' | 'uncached';
  /** Speculative decoding of the requests that set none (`GenerateOptions.speculative`):
   * off by default. */
  speculative?: Speculative;
  /** Ask `navigator.storage.persist()` first (storage the browser will not evict);
   * the answer is `info.persisted`. */
  persist?: boolean;
  /** Called when the WebGPU device is lost (a GPU reset, a tab in the background too
   * long, `device.destroy()`); the call in flight fails with GPU_LOST. */
  onDeviceLost?: (event: DeviceLostEvent) => void;
  /** true: reload as soon as the device is lost (`event.reload` is that Promise). */
  autoReload?: boolean;
  /** A session id: `sessions.save(id)` after every completed reply (chat.completions,
   * completions, generate; streaming or not), before the stream ends. */
  autoSave?: string;
  /** Each autoSave's report, or its error (a failed save does not fail the reply). */
  onAutoSave?: (event: AutoSaveEvent) => void;
  /** A session id (or `{ id, fallback }`) restored before the load resolves: the
   * conversation is ready with no prefill, `model.restored` says what was restored (null:
   * nothing is saved as `id`). A bad snapshot fails the load (SESSION_MISMATCH,
   * SESSION_CORRUPT). */
  restore?: string | { id: string; fallback?: boolean };
  /** One engine for every tab of the origin that loads this model (with this `backend`):
   * the load resolves with a `RemoteModel` on it (the first tab loads the weights; the
   * others attach). `{ via }` forces where the engine lives: "shared-worker" (a
   * SharedWorker: the default where one exists and can run the backend) or "leader"
   * (the dedicated Worker of the tab holding the model's Web Lock; another tab takes over
   * when it closes). Not with `files`. */
  shared?: boolean | { via?: 'shared-worker' | 'leader' };
  /** Shared loads: the engine moved to another tab's Worker (its host closed). */
  onHostChange?: (event: HostChangeEvent) => void;
}

/** Where a shared model's engine runs (`info.shared`). */
export interface SharedInfo {
  via: 'shared-worker' | 'leader';
  /** The host's id (a new one after a takeover). */
  host: string;
  /** Tabs attached to the engine. */
  tabs: number;
  /** Whether the engine runs in this page's Worker (the leader is this tab: closing it
   * moves the engine to another tab). */
  here: boolean;
}

export interface HostChangeEvent extends SharedInfo {
  /** The host that closed. */
  previous: string;
}

export interface DeviceLostEvent {
  /** GPUDeviceLostInfo's: "destroyed" or "unknown". */
  reason: string;
  message: string;
  /** The automatic reload (autoReload: true), else undefined. In a Worker: `reloading`. */
  reload?: Promise<void>;
  reloading?: boolean;
}

/** The constants the on-device tuner chooses (`gpu::tune::Tuned`). */
export interface TunedDesign {
  /** GEMV row layouts: row slots × lanes per row × rows per slot. */
  gemv: { slots: number; tpr: number; rps: number };
  head: { slots: number; tpr: number; rps: number };
  split_len: number;
  fold_output: boolean;
  wo_rows: number;
  /** Every GPU rows GEMV stages x once per workgroup (where its K fits workgroup memory). */
  x_shared: boolean;
  /** Every GPU rows GEMV reduces its row slots in one barrier instead of a tree. */
  one_barrier: boolean;
}

/** A tuner's sweep (`gpu::tune::Sweep`): each design timed, the best, how long. */
export interface TuneSweep {
  best: TunedDesign;
  trials: {
    stage: string;
    design: TunedDesign;
    /** Best step by the sweep's timer, ms (null: the design failed). */
    ms: number | null;
    /** The best design so far in the same race (timed in turns), ms. */
    vs_ms?: number;
    /** Best awaited step by wall clock (submit to token read), ms. */
    wall_ms?: number;
    seconds: number;
    error?: string;
  }[];
  seconds: number;
  timer: 'gpu timestamps' | 'wall clock';
  complete: boolean;
}

/** The device profiles (`gpu::profile`). */
export type ProfileName = 'gpu' | 'gpu-subgroups' | 'lavapipe' | 'swiftshader';

/** Every kernel design of a device profile (`DeviceProfile::to_json`). */
export interface ProfileDetail {
  name: ProfileName;
  /** Forced by the `profile` load option rather than detected. */
  forced: boolean;
  /** A CPU-emulated adapter (backend "auto" then times the CPU backend against it). */
  software: boolean;
  /** The decode GEMV design of each matrix role. */
  gemv: { qkv: string; o: string; gate_up: string; down: string; head: string };
  /** The order the codes are also kept in as textures, or null (storage buffers only). */
  code_textures: string | null;
  attention: string;
  split_len: number;
  fold_output: boolean;
  gemm: string;
  prefill_attention: string;
  prefill_chunk: number;
  batched_prefill: boolean;
  subgroup_size: number | null;
  shader_f16: boolean;
  topk: string;
}

export interface LoadInfo {
  shards: number;
  shardsFromCache: number;
  shardsFetched: number;
  shardsRefetched: number;
  bytes: number;
  context: number;
  adapter: string;
  /** The device profile of the GPU (also when backend "auto" timed it and kept the CPU
   * backend), and all its choices; null when no GPU was a candidate. */
  profile: ProfileName | null;
  profileDetail: ProfileDetail | null;
  /** The backend that runs the model, and why it was chosen. */
  backend: 'webgpu' | 'cpu';
  backendReason: string;
  /** What the on-device tuner chose (null: nothing tuned): its constants, in one line,
   * and its sweep (null: kept from an earlier load). */
  tuned: { design: TunedDesign; summary: string; sweep: TuneSweep | null } | null;
  /** Threads the CPU backend runs on (1: the single-threaded build), and why. */
  threads: number;
  threadsReason: string;
  /** Where the model came from: "cache" (no request succeeded or was made), "network",
   * or "cache and network". */
  source: 'cache' | 'network' | 'cache and network';
  /** Small files (hub listing, manifest, tokenizer) from the cache / the network. */
  filesFromCache: number;
  filesFetched: number;
  /** Every file that could not be stored in Cache Storage (the load went on). */
  cacheErrors: string[];
  /** Why nothing was cached (over the quota with overQuota "uncached"), else null. */
  uncached: string | null;
  offline: boolean;
  /** navigator.storage.persist()'s answer with `persist: true`, else null. */
  persisted: boolean | null;
  /** A shared load's engine (`shared: true`); absent otherwise. */
  shared?: SharedInfo;
}

/** A model in Cache Storage (`Pocket.cache.list()`). */
export interface CachedModel {
  /** The model as loaded: an absolute URL or a hub id. */
  url: string;
  /** Bytes of the shards present, and of all. */
  bytes: number;
  totalBytes: number;
  shards: number;
  shardsExpected: number;
  /** Every file present: it loads with no network. */
  complete: boolean;
  /** Milliseconds since the epoch of its last load. */
  lastUsed: number;
}

export interface CacheUsage {
  /** navigator.storage.estimate() of the origin (null where unknown). */
  usage: number | null;
  quota: number | null;
  /** Bytes of the cached models' shards. */
  models: number;
  /** Bytes of the session snapshots (`model.sessions`). */
  sessions: number;
}

/** The models pocketrt keeps in Cache Storage (one per origin). `url`: a model as given to
 * `Pocket.load` (relative URLs resolve against `base`, default the page). */
export interface PocketCache {
  list(): Promise<CachedModel[]>;
  has(url: string | URL, base?: string): Promise<boolean>;
  /** Remove the model's files and its session snapshots. */
  delete(url: string | URL, base?: string): Promise<boolean>;
  /** Remove everything, session snapshots too. */
  clear(): Promise<boolean>;
  usage(): Promise<CacheUsage>;
}

export declare const cache: PocketCache;
export declare function requestPersist(): Promise<boolean | null>;

/** Speculative decoding: each step verifies drafts of the next tokens in one batched
 * step of the model and keeps those the model itself chooses, so that a step can yield
 * several tokens; the text is the same as without (greedy token for token; sampled, the
 * same distribution and a seeded run repeats). "lookup" (or true): drafts copied from
 * the request's own context (prompt and reply so far: code edits, quotes, JSON repeat
 * their input) and the tokens a grammar forces, up to 8 a step, fewer where they fail;
 * `{ draftMax }`: the same, up to `draftMax` (1 to 32); false: none. A draft model
 * (`{ draft: url }`) is not supported in the browser yet (UNSUPPORTED). */
export type Speculative = 'lookup' | boolean | { draftMax?: number };

/** What speculative decoding did in a generation (`GenerateStats.speculation`). */
export interface SpeculationStats {
  /** Tokens drafted and verified. */
  drafted: number;
  /** Of those, accepted (each one a token without a step of its own). */
  accepted: number;
  /** Verification steps. */
  steps: number;
  acceptedPerStep: number;
}

export interface TokenPiece {
  text: string;
  token: number;
  done: boolean;
  finish: 'eos' | 'max_tokens' | 'context_full' | 'stopped' | null;
}

export interface GenerateOptions {
  maxTokens?: number;
  /** 0 (default): greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** "error" (default): a prompt longer than the context fails, a reply that fills it
   * ends with finish "context_full". "slide": a sliding window that keeps the first
   * `keep` tokens and the newest; a full cache drops the oldest half of the others, runs
   * the rest again, and the reply goes on to `maxTokens`. */
  contextOverflow?: 'error' | 'slide';
  /** Tokens at the start a sliding window never drops (at most half the context). */
  keep?: number;
  /** Speculative decoding of this request (default: the load's `speculative`). */
  speculative?: Speculative;
  signal?: AbortSignal;
  onToken?: (piece: TokenPiece) => void;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string;
}

export interface GenerateStats {
  promptTokens: number;
  reusedTokens: number;
  promptSeconds: number;
  generatedTokens: number;
  generateSeconds: number;
  tokensPerSecond: number;
  /** Context shifts of a sliding window (`contextOverflow: "slide"`). */
  contextShifts: number;
  /** The model's token reads so far made with the next step already submitted (greedy
   * decode, and sampling without penalties, bias, grammar or logprobs with a top-k of 1 to
   * 64, are pipelined one step ahead on WebGPU; 0 on the CPU backend). */
  overlappedReads: number;
  /** Speculative decoding's drafts, where the generation speculated; else null. */
  speculation: SpeculationStats | null;
}

export declare function hasWebGPU(): boolean;
export interface InitOptions {
  threads?: number;
  threadedWasmUrl?: string | URL;
  backend?: 'webgpu' | 'cpu' | 'auto';
}
/** Initialise the wasm module once (the threaded build where it can run); resolves with
 * the thread count and why (and the glue module and its exports, untyped). */
export declare function initPocket(
  wasmUrl?: string | URL,
  options?: InitOptions,
): Promise<{ wasm: unknown; exports: unknown; threads: number; threadsReason: string }>;
export declare function wasmMemoryBytes(): Promise<number>;
export declare function pocketError(message: string, code: string): PocketError;

export declare class Pocket {
  static load(url: string | URL, options: LoadOptions & { shared: true | { via?: 'shared-worker' | 'leader' } }): Promise<RemoteModel>;
  static load(url: string | URL, options?: LoadOptions): Promise<Pocket>;
  static readonly cache: PocketCache;
  readonly info: LoadInfo;
  readonly backend: 'webgpu' | 'cpu';
  readonly backendReason: string;
  /** Threads the CPU backend runs on. */
  readonly threads: number;
  encode(text: string): number[];
  decode(ids: ArrayLike<number>): string;
  /** OpenAI's `chat.completions.create` (see completions.d.ts); called as a function,
   * `chat(messages, options)` streams the reply's text (the older convenience). */
  readonly chat: ((messages: ChatMessage[], options?: GenerateOptions) => AsyncGenerator<string>) & {
    completions: ChatCompletions;
  };
  /** OpenAI's (legacy) `completions.create`: text or token ids continued. */
  readonly completions: Completions;
  /** OpenAI's `embeddings.create`: each input's final hidden state (after the output
   * norm) pooled and L2-normalised; the conversation's KV cache is left as it was. */
  readonly embeddings: Embeddings;
  /** Session snapshots: the conversation saved and restored across reloads. */
  readonly sessions: Sessions;
  /** What the `restore` load option restored (null: nothing was saved as its id). */
  readonly restored: SessionRestoreResult | null;
  generate(prompt: string | ArrayLike<number>, options?: GenerateOptions): AsyncGenerator<string>;
  generateTokens(prompt: string | ArrayLike<number>, options?: GenerateOptions): Promise<number[]>;
  stats(): GenerateStats | null;
  /** After GPU_LOST: load again (a new device, shards from Cache Storage) and refill the
   * KV cache with the conversation so far. */
  reload(): Promise<void>;
  /** Test hook: destroy the WebGPU device now, as a GPU reset would. */
  destroyDeviceForTesting(): boolean;
  /** Test hook: whether plain sampling draws on the GPU, pipelined (the default), or on
   * the host step by step. */
  gpuDrawsForTesting(on: boolean): void;
  /** Bytes of every buffer created on the WebGPU device so far (0 on the CPU backend). */
  gpuBytes(): number;
  unload(): void;
}

export declare class RemoteModel {
  readonly info: LoadInfo;
  readonly backend: 'webgpu' | 'cpu';
  readonly backendReason: string;
  readonly threads: number;
  readonly chat: ((messages: ChatMessage[], options?: GenerateOptions) => AsyncGenerator<string>) & {
    completions: ChatCompletions;
  };
  readonly completions: Completions;
  readonly embeddings: Embeddings;
  readonly sessions: Sessions;
  readonly restored: SessionRestoreResult | null;
  generate(prompt: string | number[], options?: GenerateOptions): AsyncGenerator<string>;
  encode(text: string): Promise<number[]>;
  stats(): Promise<GenerateStats | null>;
  reload(): Promise<void>;
  destroyDeviceForTesting(): Promise<boolean>;
  /** Bytes of the buffers on the engine's WebGPU device (0 on the CPU backend). */
  gpuBytes(): Promise<number>;
  /** Free the model (a shared one: leave it; the last tab's leaving frees it). */
  unload(): Promise<void>;
}

export declare class PocketWorker {
  constructor(worker: Worker);
  static create(url?: string | URL): PocketWorker;
  /** `Pocket.cache`, run in the worker. */
  readonly cache: PocketCache;
  /** The last load's `onDeviceLost` (called with `reloading` instead of `reload`). */
  onDeviceLost?: (event: DeviceLostEvent) => void;
  /** The last load's `onAutoSave`. */
  onAutoSave?: (event: AutoSaveEvent) => void;
  load(url: string | URL, options?: Omit<LoadOptions, 'wasmUrl'>): Promise<RemoteModel>;
  terminate(): void;
}

export interface ThreadSupport {
  crossOriginIsolated: boolean;
  sharedMemory: boolean;
  /** Whether this code runs in a Worker (threads need one: the main thread must not block). */
  worker: boolean;
  /** Threads the CPU backend gets by default when a model loads here (1: single-threaded). */
  threads: number;
  /** ... and in a Worker started by this page (`createWorker`). */
  workerThreads: number;
  /** Headers that make a page cross-origin isolated. */
  headers: Record<string, string>;
  reason: string;
}

export declare const THREAD_HEADERS: Readonly<Record<string, string>>;
export declare function threadSupport(): ThreadSupport;
/** The threads a load with option `threads` gets here, and why. */
export declare function plannedThreads(
  requested?: number,
  backend?: 'webgpu' | 'cpu' | 'auto',
): { threads: number; why: string };
export declare function sharedMemorySupported(): boolean;

/** A tab's handle on a shared engine (`createWorker(undefined, { shared: true })`). */
export declare class SharedEngine {
  /** Attach this tab to the engine every tab shares for `url` (loading it when none has). */
  load(url: string | URL, options?: Omit<LoadOptions, 'wasmUrl' | 'files'>): Promise<RemoteModel>;
  /** The last load's callbacks. */
  onDeviceLost?: (event: DeviceLostEvent) => void;
  onAutoSave?: (event: AutoSaveEvent) => void;
  onHostChange?: (event: HostChangeEvent) => void;
  /** Leave the engine now, as closing the tab would. */
  terminate(): void;
}

export declare function createWorker(url?: string | URL, options?: { shared?: false }): PocketWorker;
export declare function createWorker(url: string | URL | undefined, options: { shared: true }): SharedEngine;
export default Pocket;
