"""Whole models against transformers + PEFT: the committed fixtures of
tests/fixtures/make_model_fixture.py, within tests/tolerances.h's
TOL_MODEL_HF (1e-5 relative), as tests/test_model_fixture.c holds them."""
import numpy as np
import pytest

import prefixcl

from conftest import MODELS, expected, valid_rel

TOL_MODEL_HF = 1e-5


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2"])
def test_logits_and_loss_as_hf(runtime, name):
    e = expected(name)
    ids, lens, labels = e["input_ids"], e["lengths"], e["labels"]
    with prefixcl.load_model(runtime, str(MODELS / name)) as m, \
            prefixcl.load_peft(runtime, str(MODELS / name / "adapter"),
                               kv_heads=m.shape.kv_heads) as adapter:
        assert m.shape.vocab == e["logits"].shape[2]
        for prefix, logits, loss in ((adapter, "logits", "loss"), (None, "base_logits",
                                                                   "base_loss")):
            got = m.forward(ids, lens, prefix=prefix)
            assert got.dtype == np.float32 and got.flags.c_contiguous
            assert got.shape == e[logits].shape
            assert valid_rel(e[logits], got, lens) < TOL_MODEL_HF
            got_loss = m.loss(ids, lens, labels, prefix=prefix)
            assert abs(got_loss - e[loss][0]) / abs(e[loss][0]) < TOL_MODEL_HF
            last = m.last_logits(ids, lens, prefix=prefix)
            for b, n in enumerate(lens):
                np.testing.assert_allclose(last[b], got[b, n - 1], rtol=1e-5, atol=1e-5)


def test_half_storage(runtime):
    e = expected("llama")  # stored float16: half storage holds the weights exactly
    with prefixcl.load_model(runtime, str(MODELS / "llama"), storage="f16") as m:
        got = m.forward(e["input_ids"], e["lengths"])
        assert valid_rel(e["base_logits"], got, e["lengths"]) < TOL_MODEL_HF


def test_hidden_states_feed_the_head(gpt2):
    e = expected("gpt2")
    ids, lens = e["input_ids"], e["lengths"]
    hidden = gpt2.hidden_states(ids, lens)
    assert hidden.shape == (3, 13, gpt2.shape.hidden) and hidden.dtype == np.float32
    weights, _ = prefixcl.read_safetensors(str(MODELS / "gpt2" / "model.safetensors"))
    logits = hidden @ weights["transformer.wte.weight"].T  # tied head
    assert valid_rel(e["base_logits"], logits, lens) < 1e-4


def test_head_stats_and_attention_maps(runtime, gpt2):
    e = expected("gpt2")
    ids, lens = e["input_ids"][:1], e["lengths"][:1]
    L, H = gpt2.shape.layers, gpt2.shape.heads
    base = gpt2.head_stats(ids, lens, top_k=1)
    assert base.prefix_mass.shape == (L, H) and base.entropy.dtype == np.float32
    np.testing.assert_array_equal(base.prefix_mass, 0)
    with prefixcl.load_peft(runtime, str(MODELS / "gpt2" / "adapter")) as adapter:
        s1 = gpt2.head_stats(ids, lens, prefix=adapter, top_k=1)
        s32 = gpt2.head_stats(ids, lens, prefix=adapter, top_k=32)
        assert np.all((s1.prefix_mass > 0) & (s1.prefix_mass < 1))
        assert np.all(s1.entropy > 0)
        assert np.all(s1.top_k_mass <= s32.top_k_mass + 1e-6)
        P, N = adapter.prefix_len, ids.shape[1]
        for layer in range(L):
            for head in range(H):
                p = gpt2.attention_map(ids, lens, layer=layer, head=head, prefix=adapter)
                assert p.shape == (N, P + N) and p.dtype == np.float32
                np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)
                np.testing.assert_array_equal(np.triu(p[:, P:], 1), 0)  # causal
                mass = p[:, :P].sum(axis=1).mean()
                assert abs(mass - s1.prefix_mass[layer, head]) < 1e-5


def test_refusals_name_the_argument(gpt2):
    cases = [
        (dict(ids=[[1.5, 2.0]]), "PFX_ERROR_DTYPE_MISMATCH", "ids"),
        (dict(ids=[[[1, 2]]]), "PFX_ERROR_INVALID_SHAPE", "ids"),
        (dict(ids=[[1, 2], [3, 4]], lens=[2]), "PFX_ERROR_INVALID_SHAPE", "lens"),
        (dict(ids=[[1, 2]], lens=np.array([2.0])), "PFX_ERROR_DTYPE_MISMATCH", "lens"),
    ]
    for kw, status, name in cases:
        with pytest.raises(prefixcl.Error) as e:
            gpt2.forward(**kw)
        assert e.value.name == status and e.value.message.startswith(name + ":"), e.value
    with pytest.raises(prefixcl.Error) as e:
        gpt2.loss([[1, 2]], labels=[[1, 2, 3]])
    assert e.value.name == "PFX_ERROR_INVALID_SHAPE" and "labels" in e.value.message
    with pytest.raises(prefixcl.Error) as e:  # the library's own check and message
        gpt2.forward([[1, 5000]])
    assert e.value.name == "PFX_ERROR_OUT_OF_RANGE" and e.value.message
    with pytest.raises(prefixcl.Error) as e:
        gpt2.head_stats([[1, 2]], top_k=33)
    assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT"
    with pytest.raises(prefixcl.Error) as e:
        gpt2.forward([[1, 2]], prefix=prefixcl.Prefix(gains=np.zeros((3, 3))))
    assert e.value.name == "PFX_ERROR_INVALID_SHAPE" and "prefix.gains" in e.value.message


def test_load_errors(runtime):
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.load_model(runtime, str(MODELS / "gpt2"), storage="int4")
    assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT" and "storage" in e.value.message
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.load_model(runtime, str(MODELS / "no-such-model"))
    assert e.value.name == "PFX_ERROR_IO" and "no-such-model" in e.value.message
    assert prefixcl.read_config(str(MODELS / "llama")).kv_heads == 2


def test_bfloat16_storage(runtime):
    e = expected("qwen2")  # stored bfloat16: bf16 storage holds the weights exactly
    with prefixcl.load_model(runtime, str(MODELS / "qwen2"), storage="bf16") as m:
        got = m.forward(e["input_ids"], e["lengths"])
        assert valid_rel(e["base_logits"], got, e["lengths"]) < TOL_MODEL_HF


def test_init_from_config(runtime):
    config = str(MODELS.parents[2] / "examples" / "tiny-gpt2")
    with prefixcl.Model.init(runtime, config, seed=3) as a, \
            prefixcl.Model.init(runtime, config, seed=3) as b:
        ids = [[1, 2, 3, 4]]
        np.testing.assert_array_equal(a.forward(ids), b.forward(ids))
        assert a.shape.model_type == "gpt2" and a.shape.parameters > 0


def test_q8_0_storage(runtime):
    # Rows of 48 are not whole blocks of 32: they stay float32 and the logits are HF's.
    e = expected("gpt2")
    with prefixcl.load_model(runtime, str(MODELS / "gpt2"), storage="q8_0") as m:
        got = m.forward(e["input_ids"], e["lengths"])
        assert valid_rel(e["base_logits"], got, e["lengths"]) < TOL_MODEL_HF
