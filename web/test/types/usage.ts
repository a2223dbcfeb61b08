// Typed use of the npm package's API (checked by `tsc --noEmit` in scripts/test-web): a
// wrong name or type in pocket.d.ts, or an API change it misses, fails the check.
import Pocket, {
  cache,
  createWorker,
  hasWebGPU,
  initPocket,
  plannedThreads,
  pocketError,
  threadSupport,
  wasmMemoryBytes,
  type CachedModel,
  type CacheUsage,
  type ChatMessage,
  type DeviceLostEvent,
  type GenerateOptions,
  type GenerateStats,
  type LoadInfo,
  type LoadOptions,
  type LoadProgress,
  type PocketError,
  type ProfileDetail,
  type ProfileName,
  type RemoteModel,
  type HostChangeEvent,
  type SharedEngine,
  type SharedInfo,
  type AutoSaveEvent,
  type SessionInfo,
  type SessionMessage,
  type SessionRestoreResult,
  type SessionSaveReport,
  type SpeculationStats,
  type Speculative,
  type TokenPiece,
} from '../../src/pocket.js';

export async function page(out: { textContent: string | null }): Promise<void> {
  if (!hasWebGPU()) return;
  const init = await initPocket(new URL('pocketrt_bg.wasm', 'https://example.com/'), { threads: 2 });
  console.log(init.threads + 1, init.threadsReason.length);
  const controller = new AbortController();
  const options: LoadOptions = {
    onProgress: (e: LoadProgress) => console.log(e.phase, e.loaded, e.total, e.shard, e.shards),
    signal: controller.signal,
    contextLength: 2048,
    parallel: 4,
    cache: true,
    hubEndpoint: 'https://huggingface.co',
    threads: threadSupport().workerThreads,
    threadedWasmUrl: 'threads/pocketrt_bg.wasm',
    profile: 'gpu',
    offline: false,
    overQuota: 'uncached',
    speculative: 'lookup',
    persist: true,
    autoReload: false,
    onDeviceLost: (e: DeviceLostEvent) => void e.reload?.then(() => console.log(e.reason, e.message)),
  };
  const model: Pocket = await Pocket.load('taobao-mnn/MNN-Pocket-0.3B-GGUF', options);
  const info: LoadInfo = model.info;
  const count: number = info.shards + info.shardsFromCache + info.shardsFetched + info.bytes + info.threads;
  console.log(model.threads, info.threadsReason, plannedThreads(4).why);
  const profile: ProfileName | null = info.profile;
  const detail: ProfileDetail | null = info.profileDetail;
  console.log(profile, detail?.forced, detail?.gemv.qkv, detail?.subgroup_size ?? 0);
  const gen: GenerateOptions = {
    maxTokens: 64,
    temperature: 0.7,
    topK: 40,
    topP: 0.9,
    seed: 1,
    speculative: { draftMax: 4 },
    signal: controller.signal,
    onToken: (p: TokenPiece) => void (p.finish === 'eos' && p.done),
  };
  for await (const text of model.generate('Once upon a time', gen)) out.textContent += text;
  const messages: ChatMessage[] = [{ role: 'user', content: 'Hi!' }];
  for await (const text of model.chat(messages)) out.textContent += text;
  const ids: number[] = model.encode('hello');
  const text: string = model.decode(ids);
  const tokens: number[] = await model.generateTokens(ids, { maxTokens: count > 0 ? 4 : 1 });
  const stats: GenerateStats | null = model.stats();
  console.log(text, tokens, stats?.tokensPerSecond, await wasmMemoryBytes());
  const off: Speculative = false;
  const drafts: SpeculationStats | null = (await model.generateTokens(ids, { speculative: off }), model.stats()?.speculation ?? null);
  console.log(drafts?.drafted, drafts?.accepted, drafts?.steps, drafts?.acceptedPerStep);
  await model.reload();
  const hooked: boolean = model.destroyDeviceForTesting();
  const where: 'cache' | 'network' | 'cache and network' = model.info.source;
  const failedPuts: string[] = model.info.cacheErrors;
  console.log(where, failedPuts, model.info.filesFromCache, model.info.persisted ?? 'unasked', model.info.uncached);
  const saved: SessionSaveReport = await model.sessions.save('chat');
  const back: SessionRestoreResult = await model.sessions.restore('chat', { fallback: true });
  const chatBack: SessionMessage[] = back.messages;
  const kept: SessionInfo[] = await model.sessions.list();
  const bytes: Uint8Array | null = await model.sessions.export('chat');
  if (bytes) await model.sessions.import('copy', bytes);
  console.log(saved.positions, saved.rewrote, back.prefilled ?? back.dropped, chatBack[0]?.content, kept[0]?.tokens);
  console.log(await model.sessions.delete('copy'), model.restored?.tokens);
  const resumed: Pocket = await Pocket.load('/models/pocket/', {
    autoSave: 'chat',
    restore: { id: 'chat', fallback: true },
    onAutoSave: (e: AutoSaveEvent) => console.log(e.id, e.report?.seconds, e.error?.code),
  });
  console.log(resumed.restored?.messages.length, (await Pocket.load('/m/', { restore: 'chat' })).restored);
  model.unload();
  const listed: CachedModel[] = await Pocket.cache.list();
  const sizes: number[] = listed.filter((m) => m.complete && m.shards === m.shardsExpected).map((m) => m.bytes);
  const usage: CacheUsage = await cache.usage();
  const gone: boolean = (await cache.has('/models/pocket/')) && (await cache.delete(new URL('https://example.com/m/')));
  console.log(sizes, usage.quota ?? 0, usage.models + usage.sessions, gone, await Pocket.cache.clear(), listed[0]?.lastUsed);

  const worker = createWorker();
  const remote: RemoteModel = await worker.load('/models/pocket/', { files: { 'manifest.json': 'blob:x' } });
  for await (const piece of remote.chat(messages, { maxTokens: 8 })) out.textContent += piece;
  console.log(await remote.encode('x'), (await remote.stats())?.generatedTokens, remote.threads);
  await remote.reload();
  const remoteSaved: SessionSaveReport = await remote.sessions.save('chat');
  const remoteBack: SessionRestoreResult = await remote.sessions.restore('chat');
  console.log(remoteSaved.bytes, remoteBack.tokens, remote.restored?.id, (await remote.sessions.list()).length);
  worker.onAutoSave = (ev) => console.log(ev.report?.bytesWritten);
  console.log(hooked, await remote.destroyDeviceForTesting());
  console.log((await worker.cache.list()).length, (await worker.cache.usage()).usage, remote.info.source);
  worker.onDeviceLost = (e) => console.log(e.reloading);
  await remote.unload();
  worker.terminate();

  const shared: RemoteModel = await Pocket.load('/models/pocket/', {
    shared: true,
    onHostChange: (ev: HostChangeEvent) => console.log(ev.previous, ev.host, ev.via, ev.tabs),
  });
  const where2: SharedInfo | undefined = shared.info.shared;
  console.log(where2?.tabs, where2?.here, await shared.gpuBytes());
  const engine: SharedEngine = createWorker(undefined, { shared: true });
  const attached: RemoteModel = await engine.load('/models/pocket/', { shared: { via: 'leader' } });
  await attached.unload();
  engine.terminate();

  const e: PocketError = pocketError('no', 'NETWORK');
  console.log(e.code.toLowerCase());
}
