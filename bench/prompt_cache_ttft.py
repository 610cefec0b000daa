#!/usr/bin/env python3
"""Time to first token of `prefixcl serve` with and without --prompt-cache on
a chat workload: one system prompt of about 170 words shared by every
request, a different short user message each (ChatML text through
/v1/completions, streamed, greedy), one client, requests one after another.
Two rounds, cache off then on, then on then off; each server started fresh
and warmed by one request. Prints each round's median, min and max TTFT,
the prompt's tokens, the tokens the cache reused (/metrics) and the load.

    python3 bench/prompt_cache_ttft.py PREFIXCL MODEL_DIR [--requests 12]
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import time


def start(exe, model, extra):
    p = subprocess.Popen([exe, "serve", "--model", model, "--port", "0", "--slots", "4",
                          "--max-len", "1024"] + extra, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    return p, int(re.search(r":(\d+) ", p.stdout.readline().decode()).group(1))


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, json.dumps(body))
    out = json.loads(c.getresponse().read())
    c.close()
    return out


def ttft(port, prompt):
    """Seconds from the request to its first event."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.time()
    c.request("POST", "/v1/completions",
              json.dumps({"prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": True}))
    r, got = c.getresponse(), b""
    while not got.endswith(b"\n\n"):
        got += r.read(1)
    t = time.time() - t0
    r.read()
    c.close()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=12)
    args = ap.parse_args()
    random.seed(1)
    words = "river mill stone bridge water light north field harbour sketch quiet road morning".split()
    system = "You are a helpful assistant. " + " ".join(random.choice(words) for _ in range(170))
    users = ["question %d: %s" % (i, " ".join(random.choice(words) for _ in range(8)))
             for i in range(args.requests)]

    def chat(user):
        return ("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n"
                "<|im_start|>assistant\n" % (system, user))

    res = {}
    for rnd, order in enumerate([("off", "on"), ("on", "off")]):
        for name in order:
            p, port = start(args.exe, args.model, ["--prompt-cache", "256"] if name == "on" else [])
            tokens = len(post(port, "/tokenize", {"content": chat(users[0])})["tokens"])
            ttft(port, chat("warm up"))
            times = [ttft(port, chat(u)) for u in users]
            c = http.client.HTTPConnection("127.0.0.1", port)
            c.request("GET", "/metrics")
            metrics = c.getresponse().read().decode()
            reused = re.search(r"^prefixcl_prompt_cache_tokens_total (\d+)", metrics, re.M).group(1)
            p.terminate()
            p.wait()
            res.setdefault(name, []).extend(times)
            print("round %d, cache %s: prompt %d tokens, TTFT median %.3f s (min %.3f, max %.3f), "
                  "%s tokens reused, load %.1f %.1f %.1f" % ((rnd, name, tokens, statistics.median(times),
                                                              min(times), max(times), reused)
                                                             + os.getloadavg()), flush=True)
    for name, times in res.items():
        print("cache %s: TTFT median %.3f s over %d requests" % (name, statistics.median(times), len(times)))


if __name__ == "__main__":
    main()
