#!/usr/bin/env python3
"""prefixcl serve on the tiny GPT-2 fixture (tests/fixtures/generate/gpt2) and
its four adapters: concurrent greedy requests with different adapters (and
none) return the text of `prefixcl generate` for each alone, streaming gives
the text of a plain answer, a bounded load test loses and mixes up nothing
(throughput and p50/p99 latency printed), hostile requests get 4xx answers
naming the field and the server keeps serving (a truncated body, a client
gone mid-stream, counted 499; bodies past the JSON rule: \u0000, a key
twice, bytes after the object; HTTP/1.1 without Host), a full queue answers
503 with Retry-After, adapters are added and deleted while serving, past the
bank's size (403 without --allow-adapter-admin; a file that is no adapter is
named, never quoted), slow clients (300 connections that never finish their
headers, one that sends a byte at a time) leave /health, normal requests and
a running stream served and are closed past --request-timeout, SIGTERM and
SIGINT stop it. A copy of the model folder with a ChatML chat template
answers /v1/chat/completions (plain and streamed) with the tokens of
/v1/completions of the rendered prompt; raise_exception gives a 400; the
chats rendered for the Llama and Qwen tokenizers encode, without added
special tokens as the server encodes them, to transformers' ids.

usage: test_serve_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_run import run  # noqa: E402

KEY = "s3cret-key"
AUTH = {"Authorization": "Bearer " + KEY}
NEW = 8
PROMPTS = ["the quick brown fox", "Hello, world", "sketched harbour", "a"]


class Server:
    """`prefixcl serve ARGS --port 0` until stop(); port from its first line."""

    def __init__(self, exe, args):
        self.p = subprocess.Popen([exe, "serve", "--port", "0"] + args, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        # stderr read as it comes (a line per request): the pipe never fills
        self.err = []
        self.reader = threading.Thread(target=lambda: self.err.extend(iter(self.p.stderr.readline, b"")))
        self.reader.start()
        line = self.p.stdout.readline().decode()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) .* slots of (\d+) tokens", line)
        if not m:
            self.p.kill()
            self.reader.join(10)
            sys.exit("serve did not start: %r %r" % (line, b"".join(self.err).decode(errors="replace")))
        self.port, self.max_len = int(m.group(1)), int(m.group(2))
        deadline = time.time() + 30
        while self.get("/health")[0] != 200:
            if time.time() > deadline:
                sys.exit("no /health")
            time.sleep(0.1)

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(AUTH)
        h.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, r.read(), dict(r.getheaders())
        c.close()
        return out

    def get(self, path, headers=None):
        try:
            return self.request("GET", path, headers=headers)
        except OSError:
            return 0, b"", {}

    def complete(self, body):
        status, data, headers = self.request("POST", "/v1/completions", body)
        return status, json.loads(data), headers

    def stream(self, body, path="/v1/completions"):
        """The text of a streamed completion (or chat completion: its deltas),
        its finish_reason and usage; its chunks in self.chunks."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", path, body=json.dumps(dict(body, stream=True)).encode(), headers=AUTH)
        r = c.getresponse()
        if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
            sys.exit("stream: %d %r" % (r.status, r.read()))
        events = [e for e in r.read().decode().split("\n\n") if e]
        c.close()
        if events[-1] != "data: [DONE]" or not all(e.startswith("data: ") for e in events):
            sys.exit("stream events: %r" % events)
        self.chunks = [json.loads(e[6:]) for e in events[:-1]]
        chunks = [ch for ch in self.chunks if ch["choices"]]  # not include_usage's last
        text = "".join(ch["choices"][0]["text"] if "text" in ch["choices"][0]
                       else ch["choices"][0]["delta"].get("content", "") for ch in chunks)
        return text, chunks[-1]["choices"][0]["finish_reason"], self.chunks[-1].get("usage")

    def stderr(self):
        return b"".join(self.err).decode(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        self.p.send_signal(sig)
        self.p.wait(timeout=60)
        self.reader.join(60)
        self.p.stdout.close()
        err = b"".join(self.err)
        if self.p.returncode != 0 or b"stopping" not in err:
            sys.exit("signal %d: exit %d %r" % (sig, self.p.returncode, err))
        return err.decode(errors="replace")


def expected_texts(exe, model, adapters, kv_dtype="f32"):
    """(model name, prompt) -> text of `prefixcl generate` for each adapter."""
    out = {}
    for name, path in [("gpt2", None)] + adapters:
        args = ["generate", "--model", model, "--json", "--max-new-tokens", str(NEW), "--kv-dtype",
                kv_dtype]
        for p in PROMPTS:
            args += ["--prompt", p]
        if path:
            args += ["--adapter", path]
        stdout, _ = run(exe, args)
        for line in stdout.splitlines():
            o = json.loads(line)
            out[(name, o["prompt"])] = (o["text"], o["stop_reason"], len(o["ids"]))
    return out


def parallel(n_clients, jobs, fn):
    """fn(job) over jobs from n_clients threads; results in job order, latencies."""
    results, lat, lock, it = [None] * len(jobs), [0.0] * len(jobs), threading.Lock(), iter(range(len(jobs)))

    def client():
        while True:
            with lock:
                i = next(it, None)
            if i is None:
                return
            t0 = time.time()
            try:
                results[i] = fn(jobs[i])
            except Exception as e:  # the check below names it
                results[i] = ("exception", repr(e))
            lat[i] = time.time() - t0

    threads = [threading.Thread(target=client) for _ in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, lat


def check_equal(srv, expect):
    names = sorted({k[0] for k in expect})
    jobs = [(m, p, stream) for m in names for p in PROMPTS for stream in (False, True)]

    def one(job):
        m, p, stream = job
        body = {"model": m, "prompt": p, "max_tokens": NEW, "temperature": 0}
        if stream:
            return srv.stream(body)
        status, o, _ = srv.complete(body)
        if status != 200:
            return ("status", status, o)
        return o["choices"][0]["text"], o["choices"][0]["finish_reason"], o["usage"]

    results, _ = parallel(len(jobs), jobs, one)
    for job, got in zip(jobs, results):
        text, reason, count = expect[(job[0], job[1])]
        if got[0] != text or got[1] != reason or got[2]["completion_tokens"] != count:
            sys.exit("%r: %r, generate alone %r" % (job, got, (text, reason, count)))


def check_stop_strings(srv, expect):
    """A stop string cuts the text before it (finish_reason stop), streamed or not."""
    text = expect[("gpt2", "the quick brown fox")][0]
    stop = text[len(text) // 2:len(text) // 2 + 3]
    want = text[:text.index(stop)]
    body = {"model": "gpt2", "prompt": "the quick brown fox", "max_tokens": NEW, "temperature": 0,
            "stop": ["\u00a7never", stop]}
    status, o, _ = srv.complete(body)
    got = (o["choices"][0]["text"], o["choices"][0]["finish_reason"])
    streamed = srv.stream(body)[:2]
    if status != 200 or got != (want, "stop") or streamed != got:
        sys.exit("stop %r in %r: %r, streamed %r, expected %r" % (stop, text, got, streamed, want))


def several_choices(srv, expect):
    """n choices: greedy ones each equal generate alone; sampled choice i
    equals a request of n 1 with seed + i; streamed equal to not streamed;
    usage counts the prompt once and every choice's tokens."""
    prompt = "the quick brown fox"
    text, reason, count = expect[("a1", prompt)]
    status, o, _ = srv.complete({"model": "a1", "prompt": prompt, "max_tokens": NEW,
                                 "temperature": 0, "n": 3})
    got = [(c["index"], c["text"], c["finish_reason"]) for c in o.get("choices", [])]
    if status != 200 or got != [(i, text, reason) for i in range(3)] or \
            o["usage"]["completion_tokens"] != 3 * count:
        sys.exit("n 3 greedy: %d %r, generate alone %r" % (status, o, (text, reason, count)))
    body = {"model": "a2", "prompt": prompt, "max_tokens": NEW, "temperature": 1.0, "top_k": 40}
    alone = []
    for i in range(4):
        status, one, _ = srv.complete(dict(body, seed=77 + i))
        alone.append((one["choices"][0]["text"], one["choices"][0]["finish_reason"]))
    status, o, _ = srv.complete(dict(body, seed=77, n=4))
    got = [(c["text"], c["finish_reason"]) for c in sorted(o["choices"], key=lambda c: c["index"])]
    if status != 200 or got != alone or len(set(alone)) < 2:
        sys.exit("n 4 sampled: %r, each alone %r" % (got, alone))
    srv.stream(dict(body, seed=77, n=4))
    texts, finish = [""] * 4, [None] * 4
    for ch in srv.chunks:
        for c in ch["choices"]:
            texts[c["index"]] += c["text"]
            finish[c["index"]] = c["finish_reason"] or finish[c["index"]]
    usage = srv.chunks[-1].get("usage")
    if list(zip(texts, finish)) != alone or not usage or \
            usage["completion_tokens"] != o["usage"]["completion_tokens"]:
        sys.exit("n 4 streamed: %r %r, not streamed %r" % (list(zip(texts, finish)), usage, o))


def openai_fields(srv, expect):
    """OpenAI's fields beside the plain ones: a completion's logprobs object
    (greedy: the token taken is the top one; streamed: the same tokens),
    a list of prompts with n (choices prompt by prompt), the usage in its own
    last chunk (stream_options), min_p 1 is greedy, a logit bias of +100
    takes every token and -100 turns the first token to the runner-up, the
    presence and frequency penalties leave the first token's distribution
    (nothing generated yet) where repetition_penalty changes it (the prompt's
    tokens), the bad values named; /tokenize and /detokenize as
    llama-server's; a line of the access log per request."""
    prompt, other = PROMPTS[0], PROMPTS[1]
    text, reason, count = expect[("a1", prompt)]
    body = {"model": "a1", "prompt": prompt, "max_tokens": NEW, "temperature": 0}
    status, o, _ = srv.complete(dict(body, logprobs=3))
    lp = o["choices"][0]["logprobs"] if status == 200 else None
    if not lp or sorted(lp) != ["text_offset", "token_logprobs", "tokens", "top_logprobs"] or \
            o["choices"][0]["text"] != text or len(lp["tokens"]) != count or \
            any(len(v) != count for v in lp.values()) or lp["text_offset"][0] != 0 or \
            lp["text_offset"] != sorted(lp["text_offset"]) or \
            any(not (-1e9 < x <= 0) for x in lp["token_logprobs"]) or \
            any(len(t) > 3 or t.get(tok) != x or max(t.values()) != x
                for t, tok, x in zip(lp["top_logprobs"], lp["tokens"], lp["token_logprobs"])):
        sys.exit("logprobs 3: %d %r (generate: %r)" % (status, o, text))
    srv.stream(dict(body, logprobs=3))
    streamed = sum((c["choices"][0]["logprobs"]["tokens"] for c in srv.chunks), [])
    if streamed != lp["tokens"]:
        sys.exit("logprobs streamed: %r, not streamed %r" % (streamed, lp["tokens"]))
    # two prompts, two choices each: choice p * 2 + i
    status, o, _ = srv.complete(dict(body, prompt=[prompt, other], n=2))
    got = [(c["index"], c["text"]) for c in o.get("choices", [])]
    want = [(0, text), (1, text), (2, expect[("a1", other)][0]), (3, expect[("a1", other)][0])]
    ones = [srv.complete(dict(body, prompt=p))[1]["usage"]["prompt_tokens"] for p in (prompt, other)]
    if status != 200 or got != want or o["usage"]["prompt_tokens"] != sum(ones):
        sys.exit("a list of prompts: %d %r, expected %r (prompt tokens %r)" % (status, o, want, ones))
    # the usage in its own last chunk, null before
    streamed_text = srv.stream(dict(body, stream_options={"include_usage": True}))[0]
    last = srv.chunks[-1]
    if streamed_text != text or last["choices"] != [] or last["usage"]["completion_tokens"] != count or \
            any(c["usage"] is not None for c in srv.chunks[:-1]):
        sys.exit("include_usage: %r" % srv.chunks)
    status, o, _ = srv.complete(dict(body, temperature=1.0, min_p=1.0, seed=5))
    if o["choices"][0]["text"] != text:
        sys.exit("min_p 1: %r, greedy %r" % (o, text))
    ids = json.loads(srv.request("POST", "/tokenize", {"content": " ab"})[1])["tokens"]
    status, o, _ = srv.complete(dict(body, logit_bias={str(ids[0]): 100}))
    if o["choices"][0]["text"] != json.loads(srv.request("POST", "/detokenize", {"tokens": ids[:1] * NEW})[1])["content"]:
        sys.exit("logit_bias +100: %r" % o)
    first = lp["tokens"][0]
    runner_up = sorted(lp["top_logprobs"][0].items(), key=lambda kv: -kv[1])[1][0]
    first_id = json.loads(srv.request("POST", "/tokenize", {"content": first})[1])["tokens"]
    status, o, _ = srv.complete(dict(body, max_tokens=1, logit_bias={str(first_id[0]): -100}))
    if len(first_id) != 1 or o["choices"][0]["text"] != runner_up:
        sys.exit("logit_bias -100 on %r: %r, runner-up %r" % (first, o, runner_up))
    plain = srv.complete(dict(body, max_tokens=1, logprobs=5))[1]["choices"][0]["logprobs"]
    pen = srv.complete(dict(body, max_tokens=1, logprobs=5, presence_penalty=2,
                            frequency_penalty=-2))[1]["choices"][0]["logprobs"]
    rep = srv.complete(dict(body, max_tokens=1, logprobs=5,
                            repetition_penalty=3))[1]["choices"][0]["logprobs"]
    if pen != plain or rep["top_logprobs"] == plain["top_logprobs"]:
        sys.exit("penalties on the first token: %r %r, plain %r" % (pen, rep, plain))
    for field, value in [("logprobs", 21), ("logprobs", True), ("top_logprobs", 2), ("min_p", 1.5),
                         ("presence_penalty", 3), ("frequency_penalty", -2.5), ("repetition_penalty", 0),
                         ("logit_bias", {"x": 1}), ("logit_bias", {"1": 101}), ("logit_bias", {"99999": 1}),
                         ("stream_options", {"include_usage": True}), ("prompt", []), ("prompt", ["a", 3])]:
        expect_error(srv, dict(body, **{field: value}), 400, [field])
    # /tokenize and /detokenize
    status, data, _ = srv.request("POST", "/tokenize", {"content": prompt, "with_pieces": True})
    pieces = json.loads(data)["tokens"]
    back = json.loads(srv.request("POST", "/detokenize", {"tokens": [p["id"] for p in pieces]})[1])
    if status != 200 or "".join(p["piece"] for p in pieces) != prompt or back != {"content": prompt}:
        sys.exit("tokenize %r: %r -> %r" % (prompt, pieces, back))
    expect_error(srv, {"tokens": [1, -1]}, 400, ["tokens", "item 1"], path="/detokenize")
    expect_error(srv, {"content": 3}, 400, ["content"], path="/tokenize")
    log = srv.stderr()
    if not re.search(r"^access: POST /v1/completions 200 adapter=a1 prompt_tokens=\d+ completion_tokens=%d "
                     r"\d+\.\d+ s$" % count, log, re.M) or \
            not re.search(r"^access: POST /detokenize 400 adapter=- ", log, re.M):
        sys.exit("access log:\n%s" % log[-3000:])


def prompt_cache(exe, model, expect, adapters, kv_dtype="f32"):
    """--prompt-cache: a prompt that starts with a kept one of the same
    adapter reuses its rows (counted in /metrics) and answers the text of
    generate alone (both with the KV cache in kv_dtype); another adapter's
    prompt reuses nothing."""
    srv = Server(exe, ["--model", model, "--api-key", KEY, "--prompt-cache", "4", "--kv-dtype",
                       kv_dtype] + sum((["--adapter", "%s=%s" % a] for a in adapters[1:3]), []))
    prompt = PROMPTS[0]
    for name, text, reuse in [("a1", prompt[:-4], False), ("a1", prompt, True), ("a2", prompt, False),
                              ("a2", prompt, True)]:
        before = srv.get("/metrics")[1].decode()
        status, o, _ = srv.complete({"model": name, "prompt": text, "max_tokens": NEW, "temperature": 0})
        after = srv.get("/metrics")[1].decode()
        rows = [int(re.search(r"^prefixcl_prompt_cache_tokens_total (\d+)", m, re.M).group(1))
                for m in (before, after)]
        if status != 200 or (text == prompt and o["choices"][0]["text"] != expect[(name, prompt)][0]) or \
                (rows[1] > rows[0]) != reuse:
            sys.exit("prompt cache, %s %r: %d %r (generate alone %r), reused %r" %
                     (name, text, status, o, expect[(name, prompt)][0], rows))
    srv.stop()


def admin(srv, expect, adapters):
    """An adapter added while serving answers as generate with it; deleted, its name is unknown."""
    path = adapters[2][1]
    got, data, _ = srv.request("POST", "/v1/adapters", {"name": "late", "path": path})
    if got != 201:
        sys.exit("POST /v1/adapters: %d %r" % (got, data))
    for p in PROMPTS[:2]:
        status, o, _ = srv.complete({"model": "late", "prompt": p, "max_tokens": NEW, "temperature": 0})
        if status != 200 or o["choices"][0]["text"] != expect[("a2", p)][0] or o["model"] != "late":
            sys.exit("the added adapter: %d %r, expected %r" % (status, o, expect[("a2", p)][0]))
    if "late" not in [m["id"] for m in json.loads(srv.get("/v1/models")[1])["data"]]:
        sys.exit("/v1/models lacks the added adapter")
    expect_error(srv, {"name": "late", "path": path}, 409, ["late"], path="/v1/adapters")
    expect_error(srv, {"name": "gpt2", "path": path}, 409, ["base model"], path="/v1/adapters")
    expect_error(srv, {"name": "x", "path": "/nonexistent/adapter"}, 400, ["/nonexistent/adapter"],
                 path="/v1/adapters")
    expect_error(srv, {"name": 3, "path": path}, 400, ["name"], path="/v1/adapters")
    expect_error(srv, {"name": "x", "path": path + "\x00/../../nope"}, 400, ["path:", "\\u0000"], path="/v1/adapters")
    expect_error(srv, {"name": "x\x00y", "path": path}, 400, ["name:", "\\u0000"], path="/v1/adapters")
    expect_error(srv, b'{"name": "x", "path": "%s", "path": "/nope"}' % path.encode(), 400, ["path", "twice"],
                 path="/v1/adapters")
    # a file that is no adapter: named, its bytes never quoted
    with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
        f.write(b"root:x:0:0:root:/root:/bin/bash\n")
        f.flush()
        got, data, _ = srv.request("POST", "/v1/adapters", {"name": "x", "path": f.name})
        msg = json.loads(data)["error"]["message"]
        if got != 400 or f.name not in msg or "not a safetensors file" not in msg or \
                str(int.from_bytes(b"root:x:0", "little")) in msg or "root" in msg:
            sys.exit("a text file as adapter: %d %r" % (got, msg))
    if srv.request("DELETE", "/v1/adapters/late")[0] != 200 or srv.request("DELETE", "/v1/adapters/late")[0] != 404:
        sys.exit("DELETE /v1/adapters/late")
    expect_error(srv, {"model": "late", "prompt": "hi", "max_tokens": 1}, 404, ["late"])
    # a deleted adapter frees its entry: added and deleted past the bank's 8, each answers as itself
    for i in range(10):
        name, apath = adapters[1 + i % 3]
        got, data, _ = srv.request("POST", "/v1/adapters", {"name": "again", "path": apath})
        status, o, _ = srv.complete({"model": "again", "prompt": PROMPTS[0], "max_tokens": NEW, "temperature": 0})
        if got != 201 or status != 200 or o["choices"][0]["text"] != expect[(name, PROMPTS[0])][0]:
            sys.exit("adapter added for the %d. time: %d %r, %d %r" % (i + 1, got, data, status, o))
        if srv.request("DELETE", "/v1/adapters/again")[0] != 200:
            sys.exit("DELETE /v1/adapters/again")


def load_test(srv, expect, n=64, clients=16, limit=60.0):
    keys = sorted(expect)
    jobs = [keys[(i * 7) % len(keys)] for i in range(n)]

    def one(key):
        status, o, _ = srv.complete({"model": key[0], "prompt": key[1], "max_tokens": NEW, "temperature": 0})
        return o["choices"][0]["text"] if status == 200 else ("status", status)

    t0 = time.time()
    results, lat = parallel(clients, jobs, one)
    wall = time.time() - t0
    for key, got in zip(jobs, results):
        if got != expect[key][0]:
            sys.exit("load test %r: %r, expected %r" % (key, got, expect[key][0]))
    if wall > limit:
        sys.exit("load test: %d requests took %.1f s, over %.0f s" % (n, wall, limit))
    lat.sort()
    print("load test: %d requests from %d clients in %.2f s: %.1f requests/s, %.1f tokens/s, latency p50 %.3f s,"
          " p99 %.3f s" % (n, clients, wall, n / wall, n * NEW / wall, lat[len(lat) // 2],
                           lat[min(len(lat) - 1, int(len(lat) * 0.99))]))


def expect_error(srv, body, status, words, path="/v1/completions", headers=None):
    got, data, _ = srv.request("POST", path, body, headers)
    try:
        msg = json.loads(data)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        sys.exit("%r: not an error object: %r" % (body, data))
    if got != status or not all(w in msg for w in words):
        sys.exit("%r: %d %r, expected %d naming %r" % (body, got, msg, status, words))


def raw(port, data, read=True):
    """Sends bytes on a fresh connection, then closes it (reading first)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    got = s.recv(65536) if read else b""
    s.close()
    return got


def wait_metric(srv, line, why, limit=30):
    deadline = time.time() + limit
    while line not in srv.get("/metrics")[1].decode():
        if time.time() > deadline:
            sys.exit("%s:\n%s" % (why, srv.get("/metrics")[1].decode()))
        time.sleep(0.1)


def hostile(srv, max_len):
    ok = {"prompt": "hi", "max_tokens": 2, "temperature": 0}
    expect_error(srv, b"{\"prompt\": ", 400, ["JSON"])
    expect_error(srv, b"[1, 2]", 400, ["object"])
    expect_error(srv, {"max_tokens": 2}, 400, ["prompt"])
    expect_error(srv, dict(ok, prompt=5), 400, ["prompt"])
    expect_error(srv, dict(ok, max_tokens="7"), 400, ["max_tokens"])
    expect_error(srv, dict(ok, max_tokens=-1), 400, ["max_tokens"])
    expect_error(srv, dict(ok, max_tokens=1.5), 400, ["max_tokens"])
    expect_error(srv, dict(ok, max_tokens=1e300), 400, ["max_tokens"])
    expect_error(srv, dict(ok, temperature=-0.5), 400, ["temperature"])
    expect_error(srv, dict(ok, temperature="hot"), 400, ["temperature"])
    expect_error(srv, dict(ok, seed=-3), 400, ["seed"])
    expect_error(srv, dict(ok, stop=[1]), 400, ["stop"])
    expect_error(srv, dict(ok, stream="yes"), 400, ["stream"])
    expect_error(srv, dict(ok, n=0), 400, ["n:"])
    expect_error(srv, dict(ok, n=17), 400, ["n:"])
    expect_error(srv, dict(ok, n=1.5), 400, ["n:"])
    expect_error(srv, dict(ok, max_tokens=max_len), 400, [str(max_len)])
    expect_error(srv, dict(ok, model="no-such-adapter"), 404, ["no-such-adapter"])
    expect_error(srv, {"messages": []}, 400, ["chat template"], path="/v1/chat/completions")
    # one JSON rule: no \u0000, no key twice, nothing after the object
    expect_error(srv, dict(ok, prompt="GOOD\x00/../bad"), 400, ["prompt:", "\\u0000"])
    expect_error(srv, dict(ok, stop=["a", "x\x00y"]), 400, ["stop:", "\\u0000"])
    expect_error(srv, b'{"prompt": "hi", "max_tokens": 2, "max_tokens": 900}', 400, ["max_tokens", "twice"])
    expect_error(srv, b'{"prompt": "hi", "max_tokens": 2} x', 400, ["after"])
    expect_error(srv, b'{"prompt": "hi", "max_tokens": 2}{"prompt": "again"}', 400, ["after"])
    expect_error(srv, b'{"prompt": "hi\x00there", "max_tokens": 2}', 400, ["NUL byte"])
    # HTTP/1.1 names its host (RFC 9112); HTTP/1.0 need not
    got = raw(srv.port, b"GET /health HTTP/1.1\r\n\r\n")
    if not got.startswith(b"HTTP/1.1 400") or b"Host" not in got:
        sys.exit("HTTP/1.1 without Host: %r" % got)
    got = raw(srv.port, b"GET /health HTTP/1.0\r\n\r\n")
    if not re.match(rb"HTTP/1\.[01] 200 ", got):
        sys.exit("HTTP/1.0 without Host: %r" % got)
    expect_error(srv, ok, 401, ["API key"], headers={"Authorization": "Bearer wrong"})
    expect_error(srv, ok, 401, ["API key"], headers={"Authorization": ""})
    # over 1 MiB: refused from its Content-Length before the body, or once read when chunked
    got = raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                        b"Content-Length: %d\r\n\r\n" % (KEY.encode(), (1 << 20) + 1))
    if not got.startswith(b"HTTP/1.1 413") or b"limit" not in got:
        sys.exit("oversized body: %r" % got)
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", "/v1/completions", body=iter([b"x" * 65536] * 17), headers=AUTH, encode_chunked=True)
    r = c.getresponse()
    if r.status != 413:
        sys.exit("oversized chunked body: %d %r" % (r.status, r.read()))
    c.close()
    if srv.get("/nowhere")[0] != 404 or srv.request("GET", "/v1/completions")[0] != 405:
        sys.exit("unknown path or method not refused")
    if srv.get("/health", headers={"Authorization": ""})[0] != 200 or srv.get("/v1/models", {"Authorization": ""})[0] != 401:
        sys.exit("/health needs no key, /v1/models does")
    # a body cut short, a bare connection, garbage instead of HTTP
    raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Length: 100\r\n\r\n{\"prompt\": \"a" % KEY.encode(), read=False)
    raw(srv.port, b"", read=False)
    raw(srv.port, b"\x00\xff garbage\r\n\r\n", read=False)
    # a client gone mid-stream: its slot is freed, the server goes on
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    body = json.dumps({"prompt": "the quick brown fox", "max_tokens": 40, "temperature": 0, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json"
              b"\r\nContent-Length: %d\r\n\r\n%s" % (KEY.encode(), len(body), body))
    got = b""
    while b"data: " not in got:
        more = s.recv(4096)
        if not more:
            sys.exit("no first event of the stream: %r" % got)
        got += more
    s.close()
    wait_metric(srv, 'prefixcl_requests_total{code="499"} 1', "a client gone mid-stream is not counted 499")
    # a client gone while its plain request waits behind others: cancelled (code 499 in /metrics)
    long = {"prompt": "the quick brown fox", "max_tokens": max_len - 8, "temperature": 0}
    backlog = [threading.Thread(target=srv.complete, args=(long,)) for _ in range(12)]
    for t in backlog:
        t.start()
    body = json.dumps(long).encode()
    raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d"
                  b"\r\n\r\n%s" % (KEY.encode(), len(body), body), read=False)
    for t in backlog:
        t.join(60)
    wait_metric(srv, 'prefixcl_requests_total{code="499"} 2', "the request of a client gone was not cancelled")
    status, o, _ = srv.complete(ok)
    if status != 200 or o["usage"]["completion_tokens"] != 2:
        sys.exit("after the hostile requests: %d %r" % (status, o))
    deadline = time.time() + 30
    while not re.search(r"^prefixcl_running_requests 0$", srv.get("/metrics")[1].decode(), re.M):
        if time.time() > deadline:
            sys.exit("the abandoned stream still holds its slot")
        time.sleep(0.1)


def busy(exe, model):
    """One slot, one queue place: of 6 at once some get 503 with Retry-After."""
    srv = Server(exe, ["--model", model, "--slots", "1", "--queue", "1", "--api-key", KEY])
    results, _ = parallel(6, [None] * 6, lambda _: srv.request(
        "POST", "/v1/completions", {"prompt": "the quick brown fox", "max_tokens": 40, "temperature": 0}))
    codes = sorted(r[0] for r in results)
    if set(codes) != {200, 503}:
        sys.exit("queue of 1: %r" % codes)
    if not all(r[2].get("Retry-After") == "1" for r in results if r[0] == 503):
        sys.exit("503 without Retry-After")
    expect_error(srv, {"name": "x", "path": model}, 403, ["--allow-adapter-admin"], path="/v1/adapters")
    if srv.request("DELETE", "/v1/adapters/x")[0] != 403:
        sys.exit("DELETE without --allow-adapter-admin")
    srv.stop(signal.SIGINT)


def normal_p99(srv, n=24, clients=4):
    """p99 latency of short completions from `clients` threads; all must answer 200."""
    results, lat = parallel(clients, [None] * n, lambda _: srv.complete(
        {"prompt": "the quick brown fox", "max_tokens": 4, "temperature": 0})[0])
    if set(results) != {200}:
        sys.exit("normal requests beside slow clients: %r" % results)
    return sorted(lat)[min(n - 1, int(n * 0.99))]


def slow_clients(exe, model, timeout=1, cap=8):
    """300 connections from another address that never finish their headers
    and one that sends a header byte every 0.2 s: /health answers within a
    second, normal requests and a stream running before them are served,
    and every slow connection is closed once --request-timeout is past."""
    srv = Server(exe, ["--model", model, "--api-key", KEY, "--request-timeout", str(timeout),
                       "--client-connections", str(cap)])
    alone = normal_p99(srv)
    result = {}

    def stream():
        try:
            result["stream"] = srv.stream({"prompt": "the quick brown fox", "max_tokens": 40, "temperature": 0})
        except BaseException as e:  # noqa: B036 (sys.exit in a thread: reported below)
            result["stream"] = e
    streaming = threading.Thread(target=stream)
    streaming.start()
    slow = []
    for _ in range(300):
        try:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5, source_address=("127.0.0.2", 0))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        except OSError:
            pass  # refused past the address's cap
    t0, closed = time.time(), {}

    def drip():
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10, source_address=("127.0.0.3", 0))
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while time.time() - t0 < timeout + 3:
                s.sendall(b"a")
                time.sleep(0.2)
        except OSError:
            closed["drip"] = time.time() - t0
        s.close()
    dripping = threading.Thread(target=drip)
    dripping.start()
    for _ in range(5):
        t1 = time.time()
        if srv.get("/health")[0] != 200 or time.time() - t1 > 1.0:
            sys.exit("/health beside 300 slow connections: not answered within 1 s")
    beside = normal_p99(srv)
    dripping.join()
    streaming.join(60)
    if not isinstance(result.get("stream"), tuple) or result["stream"][1] != "length":
        sys.exit("a stream beside slow clients: %r" % result.get("stream"))
    if not timeout - 0.5 < closed.get("drip", 1e9) < timeout + 2:
        sys.exit("a header sent a byte at a time: closed after %r s, --request-timeout %d" % (closed.get("drip"), timeout))
    for s in slow:  # each closed by now, the cap's at once and the rest at their deadline
        s.settimeout(max(0.1, t0 + timeout + 2 - time.time()))
        try:
            if s.recv(1) != b"":
                sys.exit("a slow connection was answered")
        except ConnectionResetError:
            pass
        except socket.timeout:
            sys.exit("a slow connection is open %.1f s after its start (--request-timeout %d)" % (time.time() - t0, timeout))
        s.close()
    srv.stop()
    print("slow clients: normal requests' p99 %.3f s alone, %.3f s beside 300 slow connections" % (alone, beside))


CHATML = ("{% for message in messages %}{% if message['role'] == 'bad' %}"
          "{{ raise_exception('no bad roles here') }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


# ChatML again, written with what the first renderer lacked
MACRO_CHATML = (
    "{%- macro turn(role, text) -%}<|im_start|>{{ role ~ '\\n' ~ text }}<|im_end|>{{ '\\n' }}"
    "{%- endmacro -%}"
    "{%- set year = strftime_now('%Y') -%}{% if year | length != 4 or 0.5 * 2 != 1.0 %}wrong{% endif %}"
    "{%- for m in messages %}{{ turn(m.role, m.content) }}{% endfor -%}"
    "{% filter trim %} <|im_start|>assistant{% endfilter %}{{ '\\n' }}")


def chat_ids(exe, fix):
    """The server encodes a rendered chat without the tokenizer's added special
    tokens (the template wrote the BOS): the ids of transformers'
    apply_chat_template(tokenize=True), fixtures/chat/ids.json."""
    with open(os.path.join(fix, "..", "chat", "ids.json"), encoding="utf-8") as f:
        cases = json.load(f)
    for case in cases:
        folder = os.path.join(fix, "..", "tokenizers", case["tokenizer"])
        out = run(exe, ["tokenize", "--model", folder, "--text", case["text"], "--ids", "--no-special"])[0]
        if [int(x) for x in out.split()] != case["ids"]:
            sys.exit("chat ids %s: %s, expected %s" % (case["tokenizer"], out, case["ids"]))


def chat(exe, model):
    """/v1/chat/completions with a ChatML template in a copy of the folder."""
    tmp = tempfile.mkdtemp(prefix="prefixcl-chat-")
    try:
        folder = os.path.join(tmp, "gpt2-chat")
        shutil.copytree(model, folder, ignore=shutil.ignore_patterns("adapter*"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": CHATML, "bos_token": {"content": "<|endoftext|>"},
                       "eos_token": "<|endoftext|>"}, f)
        srv = Server(exe, ["--model", folder, "--api-key", KEY])
        # the fixture's 64 positions: GPT-2 spells each <|im_...|> in several tokens
        messages = [{"role": "user", "content": "the quick fox"}]
        rendered = "<|im_start|>user\nthe quick fox<|im_end|>\n<|im_start|>assistant\n"
        body = {"messages": messages, "max_tokens": NEW, "temperature": 0}
        status, data, _ = srv.request("POST", "/v1/chat/completions", body)
        got = json.loads(data)
        status_plain, plain, _ = srv.complete({"prompt": rendered, "max_tokens": NEW, "temperature": 0})
        if status != 200 or status_plain != 200 or got["object"] != "chat.completion":
            sys.exit("chat: %d %r / %d %r" % (status, got, status_plain, plain))
        message = got["choices"][0]["message"]
        if message["role"] != "assistant" or message["content"] != plain["choices"][0]["text"] or \
                got["usage"] != plain["usage"] or not got["id"].startswith("chatcmpl-") or \
                got["choices"][0]["finish_reason"] != plain["choices"][0]["finish_reason"]:
            sys.exit("chat: %r differs from the completion of the rendered prompt %r" % (got, plain))
        text, finish, usage = srv.stream(body, "/v1/chat/completions")
        if text != message["content"] or usage != got["usage"] or \
                finish != got["choices"][0]["finish_reason"] or srv.chunks[-1]["choices"][0]["delta"] or \
                any(ch["object"] != "chat.completion.chunk" for ch in srv.chunks):
            sys.exit("chat stream: %r %r, expected %r" % (text, srv.chunks, got))
        # logprobs: choices[].logprobs.content[] of {token, logprob, bytes, top_logprobs}
        status, data, _ = srv.request("POST", "/v1/chat/completions",
                                      dict(body, logprobs=True, top_logprobs=2))
        content = json.loads(data)["choices"][0]["logprobs"]["content"]
        joined = b"".join(bytes(e["bytes"]) for e in content).decode(errors="replace")
        if status != 200 or len(content) != got["usage"]["completion_tokens"] or \
                not joined.startswith(message["content"]) or \
                any(sorted(e) != ["bytes", "logprob", "token", "top_logprobs"] or len(e["top_logprobs"]) != 2 or
                    e["top_logprobs"][0]["logprob"] != e["logprob"] or
                    sorted(e["top_logprobs"][1]) != ["bytes", "logprob", "token"] for e in content):
            sys.exit("chat logprobs: %d %r (%r)" % (status, content, message))
        srv.stream(dict(body, logprobs=True, top_logprobs=2), "/v1/chat/completions")
        if sum((c["choices"][0]["logprobs"]["content"] for c in srv.chunks), []) != content:
            sys.exit("chat logprobs streamed: %r, expected %r" % (srv.chunks, content))
        path = "/v1/chat/completions"
        expect_error(srv, dict(body, top_logprobs=2), 400, ["top_logprobs", "logprobs"], path=path)
        expect_error(srv, dict(body, logprobs=3), 400, ["logprobs"], path=path)
        expect_error(srv, {"max_tokens": 2}, 400, ["messages"], path=path)
        expect_error(srv, {"messages": [{"role": "user"}]}, 400, ["messages", "content"], path=path)
        expect_error(srv, {"messages": [{"role": "bad", "content": "x"}]}, 400, ["no bad roles here"], path=path)
        expect_error(srv, dict(body, temperature="hot"), 400, ["temperature"], path=path)
        expect_error(srv, {"messages": [{"role": "user", "content": "a\x00b"}]}, 400, ["messages:", "\\u0000"],
                     path=path)
        srv.stop()
        # a template written with a macro, a filter block, a float and strftime_now renders the same prompt
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": MACRO_CHATML, "eos_token": "<|endoftext|>"}, f)
        srv = Server(exe, ["--model", folder, "--api-key", KEY])
        status, data, _ = srv.request("POST", "/v1/chat/completions", body)
        if status != 200 or json.loads(data)["choices"][0]["message"] != message:
            sys.exit("chat with macros: %d %r, expected %r" % (status, data, message))
        srv.stop()
        # a template that does not parse: the server runs, the chat endpoint answers 500 naming it
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": [{"name": "default", "template": "{% include 'other.jinja' %}"}]}, f)
        srv = Server(exe, ["--model", folder, "--api-key", KEY])
        expect_error(srv, body, 500, ["include", "line 1:4"], path=path)
        if srv.complete({"prompt": rendered, "max_tokens": 2, "temperature": 0})[0] != 200:
            sys.exit("chat: /v1/completions beside a broken chat template")
        err = srv.stop()
        if "will answer 500" not in err:
            sys.exit("chat: no warning about the broken template at start: %r" % err)
        print("chat: %r -> %r (%d prompt tokens)" % (rendered[-30:], text, got["usage"]["prompt_tokens"]))
    finally:
        shutil.rmtree(tmp)


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    model = os.path.join(fix, "gpt2")
    adapters = [("a%d" % i, os.path.join(model, "adapter%d" % i)) for i in range(4)]
    t0 = time.time()
    expect = expected_texts(exe, model, adapters)
    srv = Server(exe, ["--model", model, "--slots", "4", "--api-key", KEY, "--allow-adapter-admin"]
                 + sum((["--adapter", "%s=%s" % a] for a in adapters), []))
    models = json.loads(srv.get("/v1/models")[1])
    if [m["id"] for m in models["data"]] != ["gpt2", "a0", "a1", "a2", "a3"]:
        sys.exit("/v1/models: %r" % models)
    check_equal(srv, expect)
    check_stop_strings(srv, expect)
    several_choices(srv, expect)
    t1 = time.time()
    openai_fields(srv, expect)
    print("OpenAI's fields: %.1f s" % (time.time() - t1))
    load_test(srv, expect)
    hostile(srv, srv.max_len)
    admin(srv, expect, adapters)
    metrics = srv.get("/metrics")[1].decode()
    for name in ["prefixcl_requests_total{code=\"200\"}", "prefixcl_requests_total{code=\"400\"}",
                 "prefixcl_prompt_tokens_total", "prefixcl_generation_tokens_total", "prefixcl_queue_depth",
                 "prefixcl_batch_occupancy", "prefixcl_step_seconds_sum"]:
        if name not in metrics:
            sys.exit("/metrics lacks %s:\n%s" % (name, metrics))
    occupancy = float(re.search(r"^prefixcl_batch_occupancy (\S+)", metrics, re.M).group(1))
    if occupancy <= 0.25:
        sys.exit("the concurrent requests never shared a step: occupancy %.3f" % occupancy)
    srv.stop()
    prompt_cache(exe, model, expect, adapters)
    # a half KV cache (the prompt cache's rows half too) answers generate --kv-dtype f16's texts
    prompt_cache(exe, model, expected_texts(exe, model, adapters[1:3], "f16"), adapters, "f16")
    busy(exe, model)
    slow_clients(exe, model)
    chat(exe, model)
    chat_ids(exe, fix)
    print("serve: every check passed in %.1f s (batch occupancy %.2f)" % (time.time() - t0, occupancy))


if __name__ == "__main__":
    main()
