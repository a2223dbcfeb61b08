// Types of `model.sessions`: session snapshots (sessions.js).

/** A message of a saved conversation (as the chat template saw it). */
export interface SessionMessage {
  role: string;
  content: string;
  reasoning_content?: string;
  tool_calls?: unknown[];
  name?: string;
  tool_call_id?: string;
}

/** What `sessions.save(id)` did. */
export interface SessionSaveReport {
  id: string;
  /** Tokens of the history the snapshot now restores to. */
  tokens: number;
  /** Positions whose KV rows this save wrote (those added since the last save). */
  positions: number;
  bytesWritten: number;
  /** The snapshot's size now. */
  bytes: number;
  /** Written anew (a first save, another backend or id, rollbacks compacted). */
  rewrote: boolean;
  seconds: number;
}

/** What `sessions.restore(id)` (or the `restore` load option) did. */
export interface SessionRestoreResult {
  id: string;
  /** Tokens of the restored history: the KV cache holds them all. */
  tokens: number;
  /** Of those, the tokens whose KV rows came from the snapshot (all, or 0 when prefilled). */
  restored: number;
  /** Why its tokens were prefilled instead (rows of another backend or adapter; with
   * `fallback`, another model or rows failing their checksum), else null. */
  prefilled: string | null;
  /** With `fallback`: what of the snapshot was left out (its last save, cut short: the
   * saves before it are restored), else null. */
  dropped: string | null;
  /** The conversation saved with it: the last chat request's messages and its reply
   * (empty after a plain `generate`). */
  messages: SessionMessage[];
  /** The snapshot's size. */
  bytes: number;
  seconds: number;
}

/** A saved snapshot (`sessions.list()`). */
export interface SessionInfo {
  id: string;
  bytes: number;
  /** Tokens of its history (null for an imported one). */
  tokens: number | null;
  /** Milliseconds since the epoch of its last save. */
  savedAt: number;
}

export interface RestoreOptions {
  /** A snapshot of another model with this vocabulary, or whose rows fail their
   * checksum: prefill its tokens instead of failing; a save cut short: restore the saves
   * before it. */
  fallback?: boolean;
}

/** An autoSave's outcome (`onAutoSave`). */
export interface AutoSaveEvent {
  id: string;
  report?: SessionSaveReport;
  error?: Error & { code: string };
}

/** Session snapshots of a model (one folder per model, in the origin private file
 * system or Cache Storage). Errors: SESSION_MISMATCH (another tokenizer, model or
 * version; a history longer than the context), SESSION_CORRUPT (truncated, a failed
 * checksum), SESSION_NOT_FOUND, INVALID_ARGUMENT (an id that is not a string of 1 to 200
 * characters), QUOTA / IO (a failed write). */
export interface Sessions {
  /** Save the conversation: the KV rows of the positions added since its last save, or
   * the whole snapshot the first time. */
  save(id: string): Promise<SessionSaveReport>;
  /** Restore the conversation: its KV rows go into the cache (no prefill) when this
   * backend wrote them, else its tokens are prefilled (`prefilled` says why). */
  restore(id: string, options?: RestoreOptions): Promise<SessionRestoreResult>;
  /** This model's snapshots, the newest first. */
  list(): Promise<SessionInfo[]>;
  /** Remove one; whether it existed. */
  delete(id: string): Promise<boolean>;
  /** The snapshot's bytes (null when none is saved as `id`). */
  export(id: string): Promise<Uint8Array | null>;
  /** Store exported bytes as `id` (checked when restored). */
  import(id: string, bytes: Uint8Array | ArrayBuffer): Promise<void>;
}
