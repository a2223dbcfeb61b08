"""The official `openai` Python package against a running `pocketrt serve` (tests/serve.rs
starts the server on the tiny fixture model and runs this).

    python3 tests/serve/clients.py BASE_URL API_KEY fixture|parallel|coder|speculative|spec_default
    python3 tests/serve/clients.py BASE_URL API_KEY slots_save|slots_restore SLOT_DIR
    python3 tests/serve/clients.py BASE_URL API_KEY embeddings NATIVE.json

Every check raises on a mismatch (the exit code fails the Rust test); the figures it
measured are printed as one JSON line prefixed `figures:`.
"""

import json
import os
import re
import socket
import struct
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
from openai import OpenAI

BASE, KEY, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, timeout=60)
figures = {}


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok", what.split(":")[0], flush=True)


def user(text):
    return [{"role": "user", "content": text}]


def chat(text, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 24)
    return client.chat.completions.create(model="tiny", messages=user(text), **kw)


def streamed_chat(text, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 24)
    chunks = list(
        client.chat.completions.create(model="tiny", messages=user(text), stream=True, **kw)
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return content, chunks


def raw(method, path, body=None, headers=None):
    """(status, parsed JSON body) of a request the SDK would not send."""
    h = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    h.update(headers or {})
    req = urllib.request.Request(BASE + path, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(name):
    _, text = raw("GET", "/metrics")
    m = re.search(r"^pocketrt_%s (\S+)$" % name, text, re.M)
    return float(m.group(1))


def error_of(call):
    try:
        call()
    except openai.APIStatusError as e:
        return e
    raise AssertionError("expected an error")


def fixture():
    models = client.models.list().data
    check(len(models) == 1 and models[0].id == "tiny", f"models: {models}")
    context = models[0].model_extra["context_length"]
    check(context == 1024, f"models context: {context}")

    # Non-streaming and streaming chat: the same greedy text, usage, the final chunk.
    whole = chat("Hello there")
    text = whole.choices[0].message.content
    check(whole.object == "chat.completion" and whole.choices[0].message.role == "assistant",
          f"chat shape: {whole}")
    check(whole.usage.completion_tokens == 24 and len(text) >= 10, f"chat usage: {whole.usage} {text!r}")
    content, chunks = streamed_chat("Hello there", stream_options={"include_usage": True})
    check(content == text, f"stream = whole: {content!r} vs {text!r}")
    check(chunks[0].choices[0].delta.role == "assistant", f"stream role first: {chunks[0]}")
    check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens,
          f"include_usage last chunk: {chunks[-1]}")
    check(chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason,
          f"stream finish_reason: {chunks[-2]}")
    cached = whole.usage.prompt_tokens_details.cached_tokens
    again = chat("Hello there")
    check(again.usage.prompt_tokens_details.cached_tokens == whole.usage.prompt_tokens - 1,
          f"KV reuse on a repeat: {again.usage} (first {cached})")

    # Completions, whole and streamed.
    comp = client.completions.create(model="tiny", prompt="Once upon", max_tokens=20, temperature=0)
    ctext = comp.choices[0].text
    check(comp.object == "text_completion" and comp.usage.completion_tokens > 0, f"completion: {comp}")
    parts = list(client.completions.create(model="tiny", prompt="Once upon", max_tokens=20,
                                           temperature=0, stream=True))
    check("".join(p.choices[0].text for p in parts if p.choices) == ctext, "completion stream = whole")

    # Stop: a string from the greedy text ends it there, with finish_reason "stop".
    long = chat("Tell me", max_tokens=40).choices[0].message.content
    stop = long[12:15]
    cut = chat("Tell me", max_tokens=40, stop=[stop])
    check(cut.choices[0].message.content == long[: long.index(stop)] and cut.choices[0].finish_reason == "stop",
          f"stop {stop!r}: {cut.choices[0].message.content!r} from {long!r}")

    # Seed: the same sampled text twice.
    a = chat("Pick", temperature=1.0, seed=7, max_tokens=30).choices[0].message.content
    b = chat("Pick", temperature=1.0, seed=7, max_tokens=30).choices[0].message.content
    check(a == b and len(a) > 0, f"seed reproducible: {a!r} vs {b!r}")

    # Tools: a request with tools, then the tool call and its result sent back.
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    first = client.chat.completions.create(model="tiny", messages=user("Weather in Paris?"), tools=tools,
                                           temperature=0, max_tokens=16)
    check(first.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"tools request: {first}")
    history = user("Weather in Paris?") + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    second = client.chat.completions.create(model="tiny", messages=history, tools=tools, temperature=0,
                                            max_tokens=16)
    check(second.usage.prompt_tokens > first.usage.prompt_tokens, f"tool round trip: {second.usage}")

    # Structured output: a JSON Schema through the SDK's response_format, sampled; the reply
    # parses and validates (the `jsonschema` package), the same for a seed.
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "sunny", "rank"],
              "properties": {"city": {"type": "string", "maxLength": 12}, "sunny": {"type": "boolean"},
                             "rank": {"type": "integer", "minimum": 1, "maximum": 5}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema, "strict": True}}
    replies = [chat("Weather?", temperature=1.0, seed=s, max_tokens=200, response_format=fmt).choices[0]
               for s in (1, 2, 1)]
    for r in replies:
        check(r.finish_reason == "stop", f"json_schema ends on its own: {r}")
        jsonschema.validate(json.loads(r.message.content), schema)
    check(replies[0].message.content == replies[2].message.content, f"json_schema seeded: {replies}")
    e = error_of(lambda: chat("x", response_format={"type": "json_schema", "json_schema": {
        "name": "bad", "schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}}))
    check(e.status_code == 400 and "response_format" in (e.body.get("param") or ""), f"400 bad schema: {e.body}")

    # Errors in OpenAI's shape, as the SDK raises them.
    bad_key = OpenAI(base_url=BASE + "/v1", api_key="wrong", max_retries=0)
    e = error_of(lambda: bad_key.models.list())
    check(isinstance(e, openai.AuthenticationError) and e.status_code == 401, f"401: {e}")
    e = error_of(lambda: chat("x", temperature="hot"))
    check(isinstance(e, openai.BadRequestError) and e.body["param"] == "temperature", f"400 bad field: {e.body}")
    e = error_of(lambda: chat("x", temperature=-1))
    check(e.status_code == 400 and e.body["param"] == "temperature", f"400 out of range: {e.body}")
    e = error_of(lambda: client.get("/nope", cast_to=object))
    check(isinstance(e, openai.NotFoundError) and e.body["code"] == "unknown_url", f"404: {e.body}")
    status, body = raw("POST", "/v1/chat/completions", b'{"messages": [')
    check(status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error", f"400 bad JSON: {body}")
    status, body = raw("POST", "/v1/chat/completions", b'{"messages": "' + b"x" * (5 << 20) + b'"}')
    check(status == 413 and "limit" in json.loads(body)["error"]["message"], f"413: {status} {body[:200]}")
    e = error_of(lambda: chat("word " * 300))
    check(e.status_code == 400 and "1024" in e.body["message"] and e.body["code"] == "context_length_exceeded",
          f"400 prompt over the context: {e.body}")
    e = error_of(lambda: chat("x", max_tokens=10**9))
    check(e.status_code == 400 and "1024" in e.body["message"], f"400 absurd max_tokens: {e.body}")

    # The slot API without --slot-save-path: llama.cpp's 501.
    status, body = raw("POST", "/slots/0?action=save", b'{"filename": "a.session"}')
    err = json.loads(body)["error"]
    check(status == 501 and err["type"] == "not_supported_error" and "--slot-save-path" in err["message"],
          f"501 without a slot save path: {status} {body}")

    # Ten ways a request goes away: the generation stops, the server answers the next one.
    disconnect()
    check(chat("Hello there").choices[0].message.content == text, "serves after disconnects")


def disconnect():
    """Read a streamed completion's first chunks, close the socket, count the tokens the
    server generated after that (the completion-token counter once nothing runs)."""
    after = []
    for _ in range(5):
        before = metric("completion_tokens_total")
        aborted = metric("requests_aborted_total")
        host, port = BASE.removeprefix("http://").split(":")
        s = socket.create_connection((host, int(port)))
        # The end of a reply banned (the specials follow the 256 bytes): the greedy text
        # would otherwise end on its own within a few dozen tokens, and a close that
        # comes later is no abort.
        no_end = {str(i): -100 for i in range(256, 259)}
        body = json.dumps({"prompt": "Once", "max_tokens": 1000, "temperature": 0, "stream": True,
                           "logit_bias": no_end}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while got.count(b"data: ") < 6:
            got += s.recv(65536)
        s.close()
        received = got.count(b"data: ")
        for _ in range(200):
            if metric("requests_active") == 0 and metric("requests_aborted_total") > aborted:
                break
            time.sleep(0.02)
        generated = metric("completion_tokens_total") - before
        check(metric("requests_aborted_total") == aborted + 1, "disconnect counted as aborted")
        # Every token of this byte-level model is one chunk (at most a few held back as
        # parts of a character), so generated - received is what ran after the close.
        after.append(int(generated - received))
    figures["tokens_after_disconnect"] = after
    # A bound in tokens is one in time at the decode rate (thousands of tokens a second on
    # this model), so it leaves room: what it rules out is running on to max_tokens.
    check(max(after) <= 250, f"disconnect stops the generation: {after} tokens after the close (of 1000)")


def parallel():
    """16 concurrent streaming clients x 4 requests: the same greedy text as alone; KV
    slots route a conversation back to its cache."""
    prompts = [[f"client {i} question {j}" for j in range(4)] for i in range(16)]
    alone = {p: chat(p)
             .choices[0].message.content for row in prompts for p in row}

    def client_run(row):
        return [streamed_chat(p)[0] for p in row]

    t0 = time.time()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client_run, prompts))
    figures["concurrent_seconds"] = round(time.time() - t0, 2)
    for row, got in zip(prompts, results):
        for p, g in zip(row, got):
            check(g == alone[p], f"concurrent = alone for {p!r}: {g!r} vs {alone[p]!r}")

    # Two conversations alternating on 4 slots: each continues in its own cache.
    a1, b1 = chat("conversation A " * 8), chat("conversation B " * 8)
    hist_a = user("conversation A " * 8) + [{"role": "assistant", "content": a1.choices[0].message.content}]
    a2 = client.chat.completions.create(model="tiny", messages=hist_a + user("more"), temperature=0, max_tokens=4)
    check(a2.usage.prompt_tokens_details.cached_tokens >= a1.usage.prompt_tokens,
          f"routed to its slot: {a2.usage} after {a1.usage}")


def coder():
    """One short chat with the real Qwen2.5-Coder on the CPU backend, whole and streamed."""
    r = client.chat.completions.create(model="coder", messages=user("Write a Python function that adds two numbers."),
                                       temperature=0, max_tokens=12)
    text = r.choices[0].message.content
    check(len(text.strip()) > 0 and r.usage.completion_tokens == 12, f"coder chat: {r}")
    content, _ = streamed_chat("Write a Python function that adds two numbers.", max_tokens=12)
    check(content == text, f"coder stream = whole: {content!r} vs {text!r}")
    figures["coder_reply"] = text


def drafts(r):
    """(timings, usage.speculative) of a response or a stream's last chunk."""
    usage = r.usage.model_extra if r.usage is not None else {}
    return r.model_extra["timings"], usage.get("speculative")


def speculative():
    """pocketrt's "speculative" request field on a server without --spec: true drafts (by
    lookup) and gives false's text (greedy), chat and completions, whole and streamed,
    with llama-server's timings.draft_n / draft_n_accepted and usage.speculative that agree;
    absent or false: no drafts; {"n_max": N} caps the drafts per step; a stop string ends
    the text where it does without drafts; a bad n_max is a 400 naming the param."""
    text = "one two three four five six seven eight nine ten. " * 4
    off = chat(text, max_tokens=40, extra_body={"speculative": False})
    want = off.choices[0].message.content
    timings, spec = drafts(off)
    check("draft_n" not in timings and spec is None, f"off: no drafts: {timings} {spec}")
    check(timings["predicted_n"] == off.usage.completion_tokens and timings["prompt_n"] > 0,
          f"timings: {timings} {off.usage}")
    timings, spec = drafts(chat(text, max_tokens=40))
    check("draft_n" not in timings and spec is None, f"absent on a server without --spec: {timings}")
    on = chat(text, max_tokens=40, extra_body={"speculative": True})
    check(on.choices[0].message.content == want, f"true = false: {on.choices[0].message.content!r} vs {want!r}")
    timings, spec = drafts(on)
    check(timings["draft_n"] == spec["drafted"] and timings["draft_n_accepted"] == spec["accepted"]
          and spec["accepted"] <= spec["drafted"] and spec["steps"] <= on.usage.completion_tokens,
          f"timings and usage agree: {timings} {spec}")
    figures["chat_drafts"] = spec
    capped = chat(text, max_tokens=40, extra_body={"speculative": {"n_max": 2}})
    _, spec = drafts(capped)
    check(capped.choices[0].message.content == want and spec["drafted"] <= 2 * spec["steps"],
          f"n_max 2: {spec}")
    content, chunks = streamed_chat(text, max_tokens=40, extra_body={"speculative": True},
                                    stream_options={"include_usage": True})
    timings, spec = drafts(chunks[-1])
    check(content == want and timings["draft_n"] == spec["drafted"], f"stream: {content!r} {timings} {spec}")

    # Completions: the prompt repeats, so lookup drafts from the first step.
    comp = lambda **kw: client.completions.create(model="tiny", prompt=text, max_tokens=40, temperature=0, **kw)
    plain = comp(extra_body={"speculative": False}).choices[0].text
    fast = comp(extra_body={"speculative": {"n_max": 8}})
    timings, spec = drafts(fast)
    check(fast.choices[0].text == plain and spec["drafted"] > 0 and timings["draft_n"] == spec["drafted"],
          f"completions: {fast.choices[0].text!r} vs {plain!r}, {spec}")
    figures["completion_drafts"] = spec

    # Stop strings act token by token, drafts or not: the same cut, the same reason.
    for stop in (plain[5:9], plain[20:23]):
        cuts = [comp(stop=[stop], extra_body={"speculative": s}).choices[0] for s in (False, True)]
        check(cuts[0].text == cuts[1].text == plain[: plain.index(stop)]
              and cuts[0].finish_reason == cuts[1].finish_reason == "stop",
              f"stop {stop!r}: {[c.text for c in cuts]} from {plain!r}")

    for bad, param in (({"n_max": 0}, "speculative.n_max"), ({"n_max": 33}, "speculative.n_max"),
                       ("yes", "speculative"), ({"k": 1}, "speculative")):
        e = error_of(lambda: chat("x", extra_body={"speculative": bad}))
        check(e.status_code == 400 and e.body["param"] == param and e.body["type"] == "invalid_request_error",
              f"400 speculative {bad!r}: {e.body}")


def spec_default():
    """On a server with --spec lookup: a request that does not say drafts; false does not,
    and gives the same text."""
    text = "alpha beta gamma delta. " * 6
    on = client.completions.create(model="tiny", prompt=text, max_tokens=30, temperature=0)
    off = client.completions.create(model="tiny", prompt=text, max_tokens=30, temperature=0,
                                    extra_body={"speculative": False})
    _, spec = drafts(on)
    timings, none = drafts(off)
    check(spec is not None and spec["drafted"] > 0 and none is None and "draft_n" not in timings,
          f"--spec lookup is the default: {spec} / {none} {timings}")
    check(on.choices[0].text == off.choices[0].text, "the same text")


# The conversation saved in a slot and continued after a restart; the long system
# prompt the prefix cache keeps (byte-level tokens: ~330 of them, over the 256 minimum).
CONVERSATION = user("conversation to keep " * 4)
SYSTEM = "You are a careful assistant. " * 12


def slot_api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    status, text = raw(method, path, data)
    return status, json.loads(text)


def slots():
    status, listed = slot_api("GET", "/slots")
    check(status == 200 and len(listed) == 2, f"GET /slots: {status} {listed}")
    return {s["id"]: s["n_cached"] for s in listed}


def next_turn(first_reply):
    """The conversation's second turn after `first_reply` (greedy)."""
    history = CONVERSATION + [{"role": "assistant", "content": first_reply}] + user("and then?")
    return client.chat.completions.create(model="tiny", messages=history, temperature=0, max_tokens=8)


def system_chat(question):
    messages = [{"role": "system", "content": SYSTEM}] + user(question)
    return client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=4)


def slots_save():
    """On the first server: a conversation's slot saved; its next turn (the reference
    for the restarted server); the slot API's errors; a long system prompt saved by the
    prefix cache."""
    slot_dir = sys.argv[4]
    first = client.chat.completions.create(model="tiny", messages=CONVERSATION, temperature=0, max_tokens=12)
    held = {i: n for i, n in slots().items() if n > 0}
    check(len(held) == 1, f"one slot holds the conversation: {held}")
    (slot, n_cached), = held.items()
    t0 = time.time()
    status, saved = slot_api("POST", f"/slots/{slot}?action=save", {"filename": "conv.session"})
    figures["save_request_ms"] = round((time.time() - t0) * 1e3, 1)
    check(status == 200 and saved["id_slot"] == slot and saved["filename"] == "conv.session"
          and saved["n_saved"] == n_cached and saved["n_written"] == os.path.getsize(f"{slot_dir}/conv.session")
          and saved["timings"]["save_ms"] >= 0, f"slot save: {status} {saved}")
    figures["save"] = saved
    second = next_turn(first.choices[0].message.content)
    check(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
          f"the next turn continues the slot: {second.usage}")

    # Errors in OpenAI's shape: the file name, the slot id, the action, a missing, a
    # damaged and a truncated file.
    for name in ["../conv.session", "a/b", ".hidden", ""]:
        status, e = slot_api("POST", f"/slots/{slot}?action=save", {"filename": name})
        check(status == 400 and e["error"]["param"] == "filename", f"bad filename {name!r}: {status} {e}")
    status, e = slot_api("POST", "/slots/7?action=save", {"filename": "x.session"})
    check(status == 400 and e["error"]["param"] == "id_slot" and "0..2" in e["error"]["message"],
          f"unknown slot: {status} {e}")
    status, e = slot_api("POST", f"/slots/{slot}?action=load", {"filename": "x.session"})
    check(status == 400 and e["error"]["param"] == "action", f"bad action: {status} {e}")
    status, e = slot_api("POST", f"/slots/{slot}?action=restore", {"filename": "missing.session"})
    check(status == 404 and e["error"]["code"] == "file_not_found", f"missing file: {status} {e}")
    before = slots()
    whole = open(f"{slot_dir}/conv.session", "rb").read()
    def flipped(at):
        return whole[:at] + bytes([whole[at] ^ 0xFF]) + whole[at + 1:]

    damaged = [("header.session", flipped(20)), ("rows.session", flipped(len(whole) // 2)),
               ("cut.session", whole[: len(whole) // 2])]
    for name, data in damaged:
        with open(f"{slot_dir}/{name}", "wb") as f:
            f.write(data)
        status, e = slot_api("POST", f"/slots/{slot}?action=restore", {"filename": name})
        check(status == 400 and e["error"]["code"] == "session_corrupt" and e["error"]["type"] == "invalid_request_error",
              f"damaged file {name}: {status} {e}")
    check(slots() == before, f"failed restores leave the slots as they were: {slots()} vs {before}")

    # The long system prompt: answered as usual, its prefix saved once.
    a = system_chat("What is 2 + 2?")
    check(metric("prefix_cache_saves_total") == 1, "the system prefix saved")
    check(a.usage.prompt_tokens_details.cached_tokens < 256, f"saving is this request's work: {a.usage}")
    check(metric("slot_saves_total") == 1, "slot saves counted")
    with open(f"{slot_dir}/expected.json", "w") as f:
        json.dump({"first": first.choices[0].message.content, "second": second.choices[0].message.content,
                   "cached": second.usage.prompt_tokens_details.cached_tokens, "n_saved": saved["n_saved"],
                   "system": a.choices[0].message.content}, f)


def slots_restore():
    """On the restarted server: the first request with the long system prompt starts from
    the prefix cache; the saved slot restored into a free slot; the next turn reuses all
    of it, exactly as on the first server."""
    slot_dir = sys.argv[4]
    expected = json.load(open(f"{slot_dir}/expected.json"))
    b = system_chat("What is 2 + 2?")
    cached = b.usage.prompt_tokens_details.cached_tokens
    check(cached >= 256 and metric("prefix_cache_restores_total") == 1,
          f"the restarted server's first request reuses the system prefix: {b.usage}")
    check(b.choices[0].message.content == expected["system"], "the same reply after the prefix restore")
    figures["prefix_cached_tokens"] = cached

    free = [i for i, n in slots().items() if n == 0]
    check(len(free) == 1, f"one slot free: {slots()}")
    t0 = time.time()
    status, restored = slot_api("POST", f"/slots/{free[0]}?action=restore", {"filename": "conv.session"})
    figures["restore_request_ms"] = round((time.time() - t0) * 1e3, 1)
    check(status == 200 and restored["id_slot"] == free[0] and restored["n_restored"] == expected["n_saved"]
          and restored["n_read"] == os.path.getsize(f"{slot_dir}/conv.session")
          and restored["timings"]["restore_ms"] >= 0, f"slot restore: {status} {restored}")
    figures["restore"] = restored
    check(slots()[free[0]] == expected["n_saved"], "the restored slot holds the conversation")
    second = next_turn(expected["first"])
    check(second.usage.prompt_tokens_details.cached_tokens == expected["cached"]
          and second.choices[0].message.content == expected["second"],
          f"the next turn after the restart: {second.usage} {second.choices[0].message.content!r} vs {expected}")
    check(metric("slot_restores_total") == 1, "slot restores counted")

    status, erased = slot_api("POST", f"/slots/{free[0]}?action=erase")
    check(status == 200 and erased["id_slot"] == free[0] and erased["n_erased"] > expected["n_saved"],
          f"slot erase: {status} {erased}")
    check(slots()[free[0]] == 0, "the erased slot holds nothing")


def embeddings():
    """client.embeddings.create against the native Session::embed's vectors (NATIVE.json:
    texts, their vectors, the same cut to 16 dimensions, token counts)."""
    native = json.load(open(sys.argv[4]))
    texts = native["texts"]

    def f32(values):
        return struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values))

    def same(got, want, what):
        # As f32 (JSON carries an f32's shortest decimal, which parses to another double).
        check(len(got) == len(want), f"{what}: {len(got)} vectors")
        for g, w in zip(got, want):
            err = max(abs(a - b) for a, b in zip(f32(g), f32(w)))
            check(len(g) == len(w) and err == 0, f"{what}: equal to the native vector (max abs {err})")

    before = chat("Hello").choices[0].message.content
    # The client's default: encoding_format base64 (little-endian f32), decoded by it.
    r = client.embeddings.create(model="tiny", input=texts)
    check(r.object == "list" and r.model == "tiny" and [d.index for d in r.data] == [0, 1, 2],
          f"response shape: {r.object} {r.model}")
    check(r.usage.prompt_tokens == sum(native["tokens"]) == r.usage.total_tokens, f"usage: {r.usage}")
    same([d.embedding for d in r.data], native["vectors"], "base64")
    r = client.embeddings.create(model="tiny", input=texts, encoding_format="float")
    same([d.embedding for d in r.data], native["vectors"], "float")
    r = client.embeddings.create(model="tiny", input=texts[0], dimensions=16)
    same([d.embedding for d in r.data], native["dims16"][:1], "dimensions 16")
    ids = native["ids0"]
    r = client.embeddings.create(model="tiny", input=ids, encoding_format="float")
    same([r.data[0].embedding], native["vectors"][:1], "token ids")

    e = error_of(lambda: client.embeddings.create(model="tiny", input=""))
    check(e.status_code == 400 and e.body["param"] == "input", f"empty input: {e}")
    e = error_of(lambda: client.embeddings.create(model="tiny", input="a", dimensions=0))
    check(e.status_code == 400 and e.body["param"] == "dimensions", f"dimensions 0: {e}")
    e = error_of(lambda: client.embeddings.create(model="tiny", input="x" * 1100))
    check(e.status_code == 400 and e.body["code"] == "context_length_exceeded"
          and "1024" in e.message, f"too long: {e}")
    status, body = raw("POST", "/v1/embeddings", b'{"input": "a", "encoding_format": "hex"}')
    check(status == 400 and json.loads(body)["error"]["param"] == "encoding_format", f"bad format: {body}")
    # A chat after the embeddings answers as before them (the session's cache untouched).
    # (its next request reuses the cached tokens, whose rows the embeddings did not touch).
    after = chat("Hello")
    check(after.usage.prompt_tokens_details.cached_tokens > 0
          and after.choices[0].message.content == before, "the chat is unchanged")


{"fixture": fixture, "parallel": parallel, "coder": coder, "slots_save": slots_save,
 "slots_restore": slots_restore, "embeddings": embeddings, "speculative": speculative,
 "spec_default": spec_default}[MODE]()
print("figures:", json.dumps(figures), flush=True)
