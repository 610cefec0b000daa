#!/usr/bin/env python3
"""Load test of `prefixcl serve` against llama-server on the same model, side
by side: the same prompts, slots and threads in both.

    python3 bench/serve_load.py --llama-build DIR --work DIR [--prefixcl-build build]
        [--storage f32] [--clients 1,4,8,16] [--slots 8] [--threads 2] [--requests 64]
        [--prompt-tokens 64] [--new 32] [--rounds 3] [--workload load,chat]
        [--json FILE] [--markdown FILE]

WORK is the folder `bench/peer_llama.py prepare` wrote: WORK/gpt2-small (the
Hugging Face folder prefixcl serves) and WORK/gpt2-small-STORAGE.gguf (the
same weights for llama-server); --model and --gguf name others. llama-server
is LLAMA_BUILD/bin/llama-server.

Two workloads, each server started fresh for every measurement and stopped
after it:

load: --requests completions of --prompt-tokens tokens each (every one its
own random words) and --new generated tokens, sent by each of --clients
concurrent clients in turn (a client sends its next request when the last
one ends), after a warm-up of one request per busy slot. Per measurement:
tokens/s (the generated tokens over the wall time from the first request
sent to the last one done), p50 and p99 latency of a request (p99 linear
between order statistics, as numpy's default), p50 time to first token
(from the request sent to the first streamed event that carries text: both
servers hold back a token that ends inside a UTF-8 character until the next
one completes it, so a request whose first token does is timed at its
second on both). Neither server caches prompts here (prefixcl without
--prompt-cache; llama-server with --cache-ram 0 and cache_prompt false).

chat: --chat-requests chats sharing one system prompt of about 170 words,
each with its own short user message (ChatML text, as a completion), from
--chat-clients clients, after one warm-up chat; time to first token and
latency, each server with its prompt cache off and on (prefixcl
--prompt-cache MIB against none; llama-server's cache_prompt true with its
default --cache-ram against cache_prompt false with --cache-ram 0), and the
prompt tokens each reused (prefixcl's /metrics, llama-server's timings
cache_n).

The requests: prefixcl gets the prompt as text and llama-server the ids
prefixcl's /tokenize gives for it, so both prefill the same tokens (checked:
each response's prompt_tokens; whether llama-server's own /tokenize splits
the texts the same is printed). Both: the same max_tokens, temperature 0
(greedy), streamed with stream_options.include_usage, logit_bias -100 on the
model's end-of-text ids so that every request makes its tokens (prefixcl has
no ignore_eos; llama-server gets ignore_eos too); each response's
completion_tokens is checked. Slots and threads: prefixcl serve --slots N
with OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and POCL_CPU_MAX_CU_COUNT at T;
llama-server -np N -cb -t T -tb T. Both hold N requests of --max-len L
tokens (L: the longest prompt and its new tokens, rounded up to 256 as
llama-server pads a slot's context; llama-server -c N*L).

Rounds: the servers alternate, A B in odd rounds, B A in even ones (chat:
cache off then on, then on then off); the figures are medians over the
rounds. The load average (1, 5, 15 minutes) is printed at the start and end
of every measurement. Prints a line per measurement and markdown tables;
--json keeps every request's timing, --markdown the tables. Standard library
only.
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_llama import GGUF_TYPES, prefixcl_env  # noqa: E402

HOST = "127.0.0.1"
SERVERS = ("prefixcl", "llama-server")
WORKLOADS = ("load", "chat")
# words of the load prompts; the chat's are prompt_words below
LOAD_WORDS = ("the of and river mill stone bridge water light north field harbour sketch quiet road "
              "morning window garden letter table paper winter summer market station village "
              "evening mountain forest island valley").split()
# the figures of a measurement, medians over rounds
METRICS = ("tokens_per_s", "p50_s", "p99_s", "ttft_p50_s")


# -- statistics and tables -------------------------------------------------

def percentile(xs, q):
    """The q-th percentile of xs, linear between order statistics (numpy's
    default): 50 is the median, 99 of 64 values lies between the two largest."""
    if not xs:
        raise ValueError("percentile of no values")
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(records, new):
    """One measurement's figures from its requests ({start, first, end,
    prompt_tokens, completion_tokens} each, seconds)."""
    wall = max(r["end"] for r in records) - min(r["start"] for r in records)
    tokens = sum(r["completion_tokens"] for r in records)
    latency = [r["end"] - r["start"] for r in records]
    ttft = [r["first"] - r["start"] for r in records]
    return {"requests": len(records), "tokens": tokens, "wall_s": wall,
            "tokens_per_s": tokens / wall if wall > 0 else float("nan"),
            "p50_s": percentile(latency, 50), "p99_s": percentile(latency, 99),
            "ttft_p50_s": percentile(ttft, 50), "ttft_min_s": min(ttft), "ttft_max_s": max(ttft),
            "prompt_tokens": sum(r["prompt_tokens"] for r in records),
            "short": sum(r["completion_tokens"] != new for r in records)}


def medians(runs, keys=METRICS):
    """The median over rounds of each figure."""
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def ratio(a, b):
    return a / b if b else float("nan")


def load_table(levels):
    """Markdown of the load workload: levels is {clients: {server: medians}}."""
    head = ["clients"]
    for name in ("tokens/s", "p50 latency s", "p99 latency s", "TTFT p50 s"):
        head += ["%s prefixcl" % name, "llama-server", "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for clients in sorted(levels, key=int):
        a, b = levels[clients]["prefixcl"], levels[clients]["llama-server"]
        cells = [str(clients)]
        for k in METRICS:
            fmt = "%.1f" if k == "tokens_per_s" else "%.3f"
            cells += [fmt % a[k], fmt % b[k], "%.2f" % ratio(a[k], b[k])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cache_names(mib):
    """How each server's prompt cache is off and on."""
    return {"prefixcl": {"off": "none", "on": "--prompt-cache %d" % mib},
            "llama-server": {"off": "cache_prompt false, --cache-ram 0",
                             "on": "cache_prompt true"}}


def chat_table(chat, mib):
    """Markdown of the chat workload: chat is {server: {"off"|"on": medians}};
    mib: prefixcl's --prompt-cache."""
    lines = ["| server | prompt cache | TTFT p50 s | latency p50 s | prompt tokens reused | "
             "TTFT on / off |", "|---|---|---:|---:|---:|---:|"]
    for server in SERVERS:
        if server not in chat:
            continue
        for state in ("off", "on"):
            m = chat[server][state]
            change = ("%.2f" % ratio(chat[server]["on"]["ttft_p50_s"],
                                     chat[server]["off"]["ttft_p50_s"]) if state == "on" else "")
            lines.append("| %s | %s | %.3f | %.3f | %d of %d | %s |" % (
                server, cache_names(mib)[server][state], m["ttft_p50_s"], m["p50_s"], m["reused"],
                m["prompt_tokens"], change))
    return "\n".join(lines)


def one_server_table(levels, server):
    """Markdown of the load workload when one server ran."""
    lines = ["| clients | tokens/s | p50 latency s | p99 latency s | TTFT p50 s |",
             "|---:|---:|---:|---:|---:|"]
    for clients in sorted(levels, key=int):
        m = levels[clients][server]
        lines.append("| %s | %.1f | %.3f | %.3f | %.3f |" % (
            clients, m["tokens_per_s"], m["p50_s"], m["p99_s"], m["ttft_p50_s"]))
    return "\n".join(lines)


# -- servers -----------------------------------------------------------------

def loadavg():
    return list(os.getloadavg())


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, timeout=600):
    """(status, parsed JSON or text) of one plain request."""
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data.decode(errors="replace")


class Server:
    """A server process, its output in a log file, until stop()."""

    def __init__(self, kind, cmd, env, log):
        self.kind, self.cmd, self.log_path = kind, cmd, log
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stderr=self.log, stdout=(
            subprocess.PIPE if kind == "prefixcl" else self.log))
        try:
            self.port = self._prefixcl_port() if kind == "prefixcl" else self._llama_ready(cmd)
        except BaseException:
            self.stop()
            raise

    def _fail(self, why):
        self.log.flush()
        tail = Path(self.log_path).read_text(errors="replace").splitlines()[-20:]
        raise RuntimeError("%s: %s\n  %s\n%s" % (self.kind, why, shlex.join(self.cmd),
                                                 "\n".join("  | " + t for t in tail)))

    def _prefixcl_port(self):
        line = self.proc.stdout.readline().decode(errors="replace")
        m = re.search(r"listening on http://[^ ]*:(\d+) ", line)
        if not m:
            self._fail("did not start (its first line: %r)" % line)
        return int(m.group(1))

    def _llama_ready(self, cmd):
        port = int(cmd[cmd.index("--port") + 1])
        deadline = time.time() + 600
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self._fail("exited with status %d" % self.proc.returncode)
            try:
                if call(port, "GET", "/health", timeout=5)[0] == 200:
                    return port
            except OSError:
                pass
            time.sleep(0.2)
        self._fail("not ready after 600 s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.log.close()

    def metric(self, name):
        """A counter of prefixcl's /metrics (0 when absent)."""
        status, text = call(self.port, "GET", "/metrics")
        m = re.search(r"^%s (\d+)" % re.escape(name), text if status == 200 else "", re.M)
        return int(m.group(1)) if m else 0


def start(args, kind, slots, max_len, cache, tag):
    """A fresh server of `kind` with `slots` slots of max_len tokens; cache:
    its prompt cache on (True) or off."""
    log = str(Path(args.logs) / ("%s-%s.log" % (kind, tag)))
    if kind == "prefixcl":
        cmd = [str(args.prefixcl), "serve", "--model", str(args.model), "--host", HOST, "--port",
               "0", "--slots", str(slots), "--max-len", str(max_len), "--storage", args.storage,
               "--queue", str(max(64, max(args.clients + [args.chat_clients])))]
        if cache:
            cmd += ["--prompt-cache", str(args.prompt_cache_mib)]
        return Server(kind, cmd + shlex.split(args.prefixcl_args), prefixcl_env(args.threads), log)
    cmd = [str(args.llama_server), "-m", str(args.gguf), "--host", HOST, "--port",
           str(free_port()), "-np", str(slots), "-cb", "-t", str(args.threads), "-tb",
           str(args.threads), "-c", str(slots * max_len), "--no-webui"]
    if not cache:
        cmd += ["--cache-ram", "0"]
    return Server(kind, cmd + shlex.split(args.llama_args), dict(os.environ), log)


# -- requests ----------------------------------------------------------------

def body(kind, prompt, new, eos, cache):
    """A streamed greedy completion of `prompt` ({text, ids}): text to
    prefixcl, its ids to llama-server."""
    b = {"prompt": prompt["text"] if kind == "prefixcl" else prompt["ids"], "max_tokens": new,
         "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
         "logit_bias": {str(e): -100 for e in eos}}
    if kind == "llama-server":
        b.update(ignore_eos=True, cache_prompt=cache)
    return b


def stream(port, req):
    """POST /v1/completions streamed: {start, first, end, prompt_tokens,
    completion_tokens, cached} (perf_counter seconds; cached: llama-server's
    timings cache_n, None from prefixcl)."""
    c = http.client.HTTPConnection(HOST, port, timeout=600)
    data = json.dumps(req)
    try:
        start_t = time.perf_counter()
        c.request("POST", "/v1/completions", data, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:500].decode(errors="replace")))
        first = usage = cached = None
        while True:
            line = r.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            now = time.perf_counter()
            payload = line[6:].strip()
            if payload == b"[DONE]":
                break
            ev = json.loads(payload)
            if ev.get("error"):
                raise RuntimeError("error event: %s" % json.dumps(ev["error"]))
            if first is None and any(ch.get("text") for ch in ev.get("choices") or []):
                first = now
            if ev.get("usage"):
                usage = ev["usage"]
            if isinstance(ev.get("timings"), dict) and "cache_n" in ev["timings"]:
                cached = ev["timings"]["cache_n"]
        end = time.perf_counter()
    finally:
        c.close()
    if usage is None:
        raise RuntimeError("the stream carried no usage")
    return {"start": start_t, "first": first if first is not None else end, "end": end,
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"], "cached": cached}


def drive(port, reqs, clients):
    """reqs sent by `clients` threads, each its next request when its last
    one ends; the records in the order of reqs."""
    out = [None] * len(reqs)
    errors = []
    nxt = iter(range(len(reqs)))
    lock = threading.Lock()

    def client():
        while not errors:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            try:
                out[i] = stream(port, reqs[i])
            except Exception as e:  # reported by the caller
                errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("a request failed: %s" % errors[0])
    return out


def check(records, prompts, new, kind):
    """Every request prefilled its prompt's tokens and made `new` tokens."""
    for r, p in zip(records, prompts):
        if r["prompt_tokens"] != len(p["ids"]):
            raise RuntimeError("%s counted %d prompt tokens where %d were sent" % (
                kind, r["prompt_tokens"], len(p["ids"])))
        if r["completion_tokens"] != new:
            raise RuntimeError("%s made %d tokens where %d were asked" % (
                kind, r["completion_tokens"], new))


# -- prompts -----------------------------------------------------------------

def tokenize(srv, text):
    status, out = call(srv.port, "POST", "/tokenize", {"content": text})
    if status != 200:
        raise RuntimeError("%s /tokenize: %d %s" % (srv.kind, status, out))
    return out["tokens"]


def load_prompts(srv, count, length, seed):
    """`count` prompts of random words, each `length` tokens where the
    tokenizer allows ({text, ids}): a text's first `length` ids, decoded and
    encoded again."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        ids = tokenize(srv, " ".join(rng.choice(LOAD_WORDS) for _ in range(2 * length)))
        status, out = call(srv.port, "POST", "/detokenize", {"tokens": ids[:length]})
        if status != 200:
            raise RuntimeError("prefixcl /detokenize: %d %s" % (status, out))
        prompts.append({"text": out["content"], "ids": tokenize(srv, out["content"])})
    return prompts


def prompt_words(requests):
    """The chat workload's text: a system prompt of about 170 words and
    `requests` short user messages (seeded)."""
    rng = random.Random(1)
    words = "river mill stone bridge water light north field harbour sketch quiet road morning".split()
    system = "You are a helpful assistant. " + " ".join(rng.choice(words) for _ in range(170))
    users = ["question %d: %s" % (i, " ".join(rng.choice(words) for _ in range(8)))
             for i in range(requests)]
    return system, users


def chatml(system, user):
    return ("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n"
            "<|im_start|>assistant\n" % (system, user))


def prepare_prompts(args):
    """Every prompt of the run, tokenized by a prefixcl server; whether
    llama-server's tokenizer splits the texts the same."""
    srv = start(args, "prefixcl", 1, 64, False, "tokenize")
    try:
        out = {}
        if "load" in args.workload:
            warm = max(min(c, args.slots) for c in args.clients)
            both = load_prompts(srv, args.requests + warm, args.prompt_tokens, args.seed)
            out["load"], out["load_warm"] = both[:args.requests], both[args.requests:]
        if "chat" in args.workload:
            system, users = prompt_words(args.chat_requests)
            out["chat"] = [{"text": chatml(system, u)} for u in users]
            out["chat_warm"] = [{"text": chatml(system, "warm up")}]
        for group in out.values():
            for p in group:
                p.setdefault("ids", tokenize(srv, p["text"]))
    finally:
        srv.stop()
    if "llama-server" in args.servers:
        every = [p for group in out.values() for p in group]
        srv = start(args, "llama-server", 1, 64, False, "tokenize")
        try:
            same = sum(tokenize(srv, p["text"]) == p["ids"] for p in every)
        finally:
            srv.stop()
        out["tokenizers_agree"] = "%d of %d" % (same, len(every))
    return out


def max_len(prompts, new):
    """Tokens a slot holds: the longest prompt and its new tokens, rounded up
    to 256 as llama-server pads a slot's context."""
    need = max(len(p["ids"]) for p in prompts) + new
    return -(-need // 256) * 256


# -- workloads ---------------------------------------------------------------

def measure(args, kind, tag, slots, length, cache, warm, prompts, clients, new, eos):
    """A fresh server: the warm-up requests, then `prompts` from `clients`
    clients, timed; the figures and every record."""
    srv = start(args, kind, slots, length, cache, tag)
    try:
        drive(srv.port, [body(kind, p, new, eos, cache) for p in warm], max(1, min(clients, len(warm))))
        reused0 = srv.metric("prefixcl_prompt_cache_tokens_total") if kind == "prefixcl" else 0
        before = loadavg()
        records = drive(srv.port, [body(kind, p, new, eos, cache) for p in prompts], clients)
        after = loadavg()
        reused = (srv.metric("prefixcl_prompt_cache_tokens_total") - reused0 if kind == "prefixcl"
                  else sum(r["cached"] or 0 for r in records))
    finally:
        srv.stop()
    check(records, prompts, new, kind)
    fig = summarize(records, new)
    fig.update(load=[before, after], reused=reused)
    t0 = min(r["start"] for r in records)
    fig["records"] = [{k: (round(v - t0, 6) if k in ("start", "first", "end") else v)
                       for k, v in r.items()} for r in records]
    return fig


def say(what, fig):
    print("  %-34s %7.1f tok/s, p50 %.3f s, p99 %.3f s, TTFT p50 %.3f s (%d requests, %d tokens "
          "in %.1f s%s); load %.2f %.2f %.2f -> %.2f %.2f %.2f" % (
              what, fig["tokens_per_s"], fig["p50_s"], fig["p99_s"], fig["ttft_p50_s"],
              fig["requests"], fig["tokens"], fig["wall_s"],
              ", %d prompt tokens reused" % fig["reused"] if fig["reused"] else "",
              *fig["load"][0], *fig["load"][1]), flush=True)


def order(servers, rnd):
    return list(servers) if rnd % 2 == 0 else list(reversed(servers))


def run_load(args, prompts, eos):
    length = max_len(prompts["load"], args.new)
    levels = {}
    sizes = [len(p["ids"]) for p in prompts["load"]]
    print("load: %d requests of %d-%d prompt tokens and %d new, --max-len %d, %d slots, %d threads"
          % (args.requests, min(sizes), max(sizes), args.new, length, args.slots, args.threads))
    for clients in args.clients:
        runs = {s: [] for s in args.servers}
        warm = prompts["load_warm"][:min(clients, args.slots)]
        for rnd in range(args.rounds):
            for kind in order(args.servers, rnd):
                fig = measure(args, kind, "load-c%d-r%d" % (clients, rnd + 1), args.slots, length,
                              False, warm, prompts["load"], clients, args.new, eos)
                runs[kind].append(fig)
                say("clients %d, round %d, %s:" % (clients, rnd + 1, kind), fig)
        levels[str(clients)] = {s: {"median": medians(r), "runs": r} for s, r in runs.items()}
    return levels


def run_chat(args, prompts, eos):
    length = max_len(prompts["chat"] + prompts["chat_warm"], args.chat_new)
    print("chat: %d chats of %d-%d prompt tokens and %d new, %d client(s), --max-len %d" % (
        args.chat_requests, min(len(p["ids"]) for p in prompts["chat"]),
        max(len(p["ids"]) for p in prompts["chat"]), args.chat_new, args.chat_clients, length))
    runs = {s: {"off": [], "on": []} for s in args.servers}
    for rnd in range(args.rounds):
        for kind in order(args.servers, rnd):
            for state in order(("off", "on"), rnd):
                fig = measure(args, kind, "chat-%s-r%d" % (state, rnd + 1), args.slots, length,
                              state == "on", prompts["chat_warm"], prompts["chat"],
                              args.chat_clients, args.chat_new, eos)
                runs[kind][state].append(fig)
                say("chat round %d, %s, cache %s:" % (rnd + 1, kind, state), fig)
    keys = METRICS + ("reused", "prompt_tokens")
    return {s: {st: dict(medians(r, keys), runs=r) for st, r in states.items()}
            for s, states in runs.items()}


def eos_ids(model):
    """The model folder's end-of-text ids (config.json eos_token_id)."""
    e = json.loads((Path(model) / "config.json").read_text()).get("eos_token_id")
    return [] if e is None else e if isinstance(e, list) else [e]


def machine():
    cpu = "?"
    try:
        m = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = m.group(1) if m else cpu
    except OSError:
        pass
    return "%s, %d cores" % (cpu, os.cpu_count() or 0)


def llama_version(exe):
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    return " ".join((out.stdout + out.stderr).split())[:200]


def markdown(report, args):
    both = len(args.servers) == 2
    heading = ("%s to %s; %s; storage %s, %d slots, %d threads; medians of %d rounds%s; "
               "1-minute load %.2f-%.2f" % (
                   report["started"], report["finished"], report["machine"], args.storage,
                   args.slots, args.threads, args.rounds,
                   " (servers alternating)" if both else "", *report["load_range"]))
    parts = [heading]
    if "load" in report:
        parts.append("Load: %d requests, %d prompt tokens, %d new, streamed, greedy%s:" % (
            args.requests, args.prompt_tokens, args.new,
            " (ratio: prefixcl / llama-server)" if both else ""))
        levels = {c: {s: v["median"] for s, v in lv.items()} for c, lv in report["load"].items()}
        parts.append(load_table(levels) if both
                     else one_server_table(levels, args.servers[0]))
    if "chat" in report:
        parts.append("Chat: %d chats sharing a system prompt, %d new tokens, %d client(s):" % (
            args.chat_requests, args.chat_new, args.chat_clients))
        parts.append(chat_table(report["chat"], args.prompt_cache_mib))
    return "\n\n".join(parts) + "\n"


def load_range(report):
    loads = []
    for lv in report.get("load", {}).values():
        for v in lv.values():
            loads += [x for r in v["runs"] for pair in r["load"] for x in pair[:1]]
    for states in report.get("chat", {}).values():
        for v in states.values():
            loads += [x for r in v["runs"] for pair in r["load"] for x in pair[:1]]
    return [min(loads), max(loads)] if loads else [float("nan")] * 2


def parse_list(text, what, choices=None):
    items = [t for t in text.split(",") if t]
    if not items or (choices and any(t not in choices for t in items)):
        sys.exit("%s %s: a comma-separated list of %s" % (what, text, ", ".join(choices or ["ints"])))
    return items


def options():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-build", help="llama.cpp's cmake build folder (bin/llama-server)")
    ap.add_argument("--work", help="the folder bench/peer_llama.py prepare wrote")
    ap.add_argument("--prefixcl-build", default="build", help="prefixcl's meson build folder")
    ap.add_argument("--model", help="the folder prefixcl serves (default: WORK/gpt2-small)")
    ap.add_argument("--gguf", help="llama-server's model (default: WORK/gpt2-small-STORAGE.gguf)")
    ap.add_argument("--storage", default="f32", choices=GGUF_TYPES,
                    help="prefixcl --storage and the GGUF of the same name (default f32)")
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="which to run, of prefixcl, llama-server (default both)")
    ap.add_argument("--workload", default=",".join(WORKLOADS), help="of load, chat (default both)")
    ap.add_argument("--clients", default="1,4,8,16", help="concurrent clients of the load workload")
    ap.add_argument("--slots", type=int, default=8, help="prefixcl --slots, llama-server -np")
    ap.add_argument("--threads", type=int, default=2, help="threads of each server")
    ap.add_argument("--requests", type=int, default=64, help="requests of a load measurement")
    ap.add_argument("--prompt-tokens", type=int, default=64, help="tokens of a load prompt")
    ap.add_argument("--new", type=int, default=32, help="tokens a load request makes")
    ap.add_argument("--chat-requests", type=int, default=12, help="chats of a chat measurement")
    ap.add_argument("--chat-new", type=int, default=8, help="tokens a chat makes")
    ap.add_argument("--chat-clients", type=int, default=1, help="concurrent clients of the chat")
    ap.add_argument("--prompt-cache-mib", type=int, default=256, help="prefixcl --prompt-cache")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, servers alternating")
    ap.add_argument("--seed", type=int, default=1, help="of the load prompts' words")
    ap.add_argument("--prefixcl-args", default="", help="more options of prefixcl serve")
    ap.add_argument("--llama-args", default="", help="more options of llama-server")
    ap.add_argument("--json", help="write every figure and request timing here")
    ap.add_argument("--markdown", help="write the tables here")
    args = ap.parse_args()
    args.servers = parse_list(args.servers, "--servers", SERVERS)
    args.workload = parse_list(args.workload, "--workload", WORKLOADS)
    try:
        args.clients = [int(c) for c in parse_list(args.clients, "--clients")]
    except ValueError:
        sys.exit("--clients %s: a comma-separated list of ints" % args.clients)
    for name in ("slots", "threads", "requests", "prompt_tokens", "new", "chat_requests",
                 "chat_new", "chat_clients", "prompt_cache_mib", "rounds"):
        if getattr(args, name) < 1:
            sys.exit("--%s: at least 1" % name.replace("_", "-"))
    if min(args.clients) < 1:
        sys.exit("--clients: at least 1 each")
    if not args.work and not (args.model and (args.gguf or args.servers == ["prefixcl"])):
        sys.exit("--work (or --model, and --gguf with llama-server) is required")
    args.model = Path(args.model or Path(args.work) / "gpt2-small")
    args.gguf = Path(args.gguf or Path(args.work or ".") / ("gpt2-small-%s.gguf" % args.storage))
    args.prefixcl = Path(args.prefixcl_build) / "tools" / "prefixcl"
    need = [(args.model / "config.json", "--model"), (args.prefixcl, "--prefixcl-build")]
    if "llama-server" in args.servers:
        if not args.llama_build:
            sys.exit("--llama-build is required with llama-server")
        args.llama_server = Path(args.llama_build) / "bin" / "llama-server"
        need += [(args.gguf, "--gguf (bench/peer_llama.py prepare writes it)"),
                 (args.llama_server, "--llama-build (cmake --build DIR --target llama-server)")]
    for path, what in need:
        if not path.exists():
            sys.exit("no %s (%s)" % (path, what))
    return args


def main():
    args = options()
    args.logs = tempfile.mkdtemp(prefix="serve_load.")
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    report = {"started": started, "machine": machine(), "args": {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    if "llama-server" in args.servers:
        report["llama_server"] = llama_version(args.llama_server)
    print("%s; %s; load %.2f %.2f %.2f; server logs in %s" % (started, report["machine"],
                                                              *loadavg(), args.logs), flush=True)
    eos = eos_ids(args.model)
    prompts = prepare_prompts(args)
    report["tokenizers_agree"] = prompts.get("tokenizers_agree")
    if report["tokenizers_agree"]:
        print("llama-server's /tokenize splits %s prompt texts as prefixcl's does (it is sent "
              "prefixcl's ids)" % report["tokenizers_agree"])
    if "load" in args.workload:
        report["load"] = run_load(args, prompts, eos)
    if "chat" in args.workload:
        report["chat"] = run_chat(args, prompts, eos)
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    report["load_range"] = load_range(report)
    md = markdown(report, args)
    print("\n" + md)
    if args.markdown:
        Path(args.markdown).write_text(md)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
