"""Generation over a bank of adapters against Hugging Face greedy generation
(tests/fixtures/make_generate_fixture.py, as tests/test_generate.c holds it):
every case of a model in one batch, each with its own adapter; the same
through the scheduler; the text cases through the tokenizer."""
import json

import numpy as np
import pytest

import prefixcl

from conftest import FIXTURES

GEN = FIXTURES / "generate"


def cases(name):
    out = []
    for line in (GEN / name / "expected.txt").read_text().splitlines():
        adapter, prompt, generated = line.split("\t")
        out.append((None if adapter == "-" else str(GEN / name / adapter),
                    [int(t) for t in prompt.split()], [int(t) for t in generated.split()]))
    return out


@pytest.mark.parametrize("name,kv_dtype",
                         [("gpt2", "f32"), ("llama", "f32"), ("gpt2", "f16"), ("llama", "f16")])
def test_many_adapters_in_one_batch(runtime, name, kv_dtype):
    c = cases(name)
    with prefixcl.load_model(runtime, str(GEN / name)) as m:
        seen = []
        got = m.generate([p for _, p, _ in c], adapters=[a for a, _, _ in c],
                         max_new_tokens=len(c[0][2]), on_token=lambda i, t: seen.append((i, t)),
                         kv_dtype=kv_dtype)
        assert got == [g for _, _, g in c]
        assert sorted(seen) == sorted((i, t) for i, g in enumerate(got) for t in g)


def test_bank_entries_and_forward(runtime):
    c = cases("gpt2")
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m, \
            prefixcl.AdapterBank(m, 4) as bank:
        entries = {str(GEN / "gpt2" / f"adapter{i}"): bank.add(str(GEN / "gpt2" / f"adapter{i}"))
                   for i in range(4)}
        assert len(bank) == 4 and bank.prefix_len > 0
        got = prefixcl.generate(m, [p for _, p, _ in c], bank=bank,
                                adapters=[entries.get(a, -1) for a, _, _ in c], max_new_tokens=7)
        assert got == [g for _, _, g in c]
        # The bank as the prefix of a model call: item b with entry b equals each adapter alone.
        ids = [c[0][1]] * 2
        both = m.forward(ids, prefix=bank.prefix([1, 2]))
        for b, entry in enumerate((1, 2)):
            with prefixcl.load_peft(runtime, str(GEN / "gpt2" / f"adapter{entry}")) as alone:
                np.testing.assert_allclose(both[b], m.forward([ids[b]], prefix=alone)[0],
                                           rtol=1e-5, atol=1e-5)
        with pytest.raises(prefixcl.Error) as e:
            m.forward(ids, prefix=bank.prefix([0]))
        assert e.value.name == "PFX_ERROR_INVALID_SHAPE" and "entries" in e.value.message


def test_text_through_the_tokenizer(runtime):
    lines = [line.split("\t") for line in (GEN / "gpt2" / "text.txt").read_text().splitlines()]
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m, \
            prefixcl.Tokenizer(str(GEN / "gpt2")) as tok:
        got = prefixcl.generate(m, [json.loads(p) for _, p, _ in lines], tokenizer=tok,
                                adapters=[None if a == "-" else str(GEN / "gpt2" / a)
                                          for a, _, _ in lines], max_new_tokens=7)
        assert got == [json.loads(g) for _, _, g in lines]


def test_sampling_is_seeded(runtime):
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m:
        kw = dict(max_new_tokens=8, temperature=1.0, top_k=20, seed=[5, 5, 6])
        a = prefixcl.generate(m, [[5, 17, 3]] * 3, **kw)
        assert a == prefixcl.generate(m, [[5, 17, 3]] * 3, **kw)
        assert a[0] == a[1]
        stop = a[0][2]
        short = prefixcl.generate(m, [[5, 17, 3]], stop=[stop], **dict(kw, seed=5))[0]
        assert short == a[0][:a[0].index(stop) + 1]


def test_generate_refusals(runtime):
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m:
        for kw, name in ((dict(prompts=[[1, 2]], adapters=[None, None]), "adapters"),
                         (dict(prompts=[[1.0, 2.0]]), "prompts[0]"),
                         (dict(prompts=[[]]), "prompts[0]"),
                         (dict(prompts=[[1, 2]], max_new_tokens=0), "max_new_tokens"),
                         (dict(prompts=[[1, 2]], adapters=[0]), "adapters[0]"),
                         (dict(prompts=[[1, 2]], kv_dtype="f8"), "kv_dtype")):
            with pytest.raises(prefixcl.Error) as e:
                prefixcl.generate(m, **kw)
            assert e.value.message.startswith(name), e.value
        with pytest.raises(prefixcl.Error) as e:
            prefixcl.generate(m, [[1, 2]], adapters=[str(GEN / "no-such-adapter")])
        assert e.value.name == "PFX_ERROR_IO"
        with pytest.raises(prefixcl.Error) as e:  # a weight storage, not a KV cache's
            prefixcl.generate(m, [[1, 2]], kv_dtype="q8_0")
        assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT" and "dtype" in e.value.message


@pytest.mark.parametrize("kv_dtype", ["f32", "f16"])
def test_scheduler(runtime, kv_dtype):
    c = cases("gpt2")
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m, \
            prefixcl.AdapterBank(m, 4) as bank:
        entries = {str(GEN / "gpt2" / f"adapter{i}"): bank.add(str(GEN / "gpt2" / f"adapter{i}"))
                   for i in range(4)}
        with prefixcl.Scheduler(m, bank, slots=3, max_len=32, kv_dtype=kv_dtype) as s:
            requests = [s.submit(p, adapter=entries.get(a, -1), max_new_tokens=7)
                        for a, p, _ in c]
            for r, (_, _, want) in zip(requests, c):
                assert r.wait(timeout=120) == want and r.finish == "length"
            cut = s.submit(c[0][1], max_new_tokens=7, on_token=lambda t: False)
            assert cut.wait(timeout=120) == c[0][2][:1] and cut.finish == "stop"
            stats = s.stats()
            assert stats["generated_tokens"] == 7 * len(c) + 1 and stats["slots"] == 3
        with pytest.raises(prefixcl.Error, match="scheduler: closed"):
            s.submit([1])


def test_scheduler_cancel(runtime):
    import threading
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m, \
            prefixcl.Scheduler(m, slots=1, max_len=64) as s:
        first = threading.Event()
        r = s.submit([5, 17, 3], max_new_tokens=60, on_token=lambda t: first.set())
        assert first.wait(timeout=120)
        s.cancel(r)
        r.wait(timeout=120)
        assert r.finish == "cancelled" and 1 <= len(r.tokens) < 60
