"""PEFT adapter folders, gains files and safetensors written and read back
through the library's own readers and writers."""
import numpy as np
import pytest

import prefixcl

from conftest import FIXTURES, MODELS

GEN = FIXTURES / "generate"


def test_peft_round_trip(runtime, tmp_path):
    with prefixcl.load_peft(runtime, str(MODELS / "llama" / "adapter"), kv_heads=2) as a:
        assert len(a.keys) == 2 and a.keys[0].shape == (2, 5, 12)
        prefixcl.save_peft(runtime, str(tmp_path), a, base_model_name_or_path="tiny-llama")
        config = prefixcl.read_peft_config(str(tmp_path))
        assert (config.num_virtual_tokens, config.num_layers, config.token_dim) == (5, 2, 24)
        assert config.base_model_name_or_path == "tiny-llama" and config.task_type == "CAUSAL_LM"
        with prefixcl.load_peft(runtime, str(tmp_path)) as b:
            for x, y in zip(a.keys + a.values, b.keys + b.values):
                np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_prefix_from_arrays(runtime, gpt2):
    # Tensors made from numpy arrays attend as the adapter's own.
    ids = [[5, 17, 3, 44, 9]]
    with prefixcl.load_peft(runtime, str(MODELS / "gpt2" / "adapter")) as a:
        keys = [prefixcl.Tensor.from_numpy(runtime, t.numpy()) for t in a.keys]
        values = [prefixcl.Tensor.from_numpy(runtime, t.numpy()) for t in a.values]
        with prefixcl.Prefix(keys, values) as mine:
            np.testing.assert_array_equal(gpt2.forward(ids, prefix=mine),
                                          gpt2.forward(ids, prefix=a))


def test_gains_round_trip_and_bank(runtime, tmp_path):
    s = prefixcl.read_config(str(GEN / "gpt2"))
    L, H, D = s.layers, s.heads, s.head_dim
    rng = np.random.default_rng(1)
    g = prefixcl.Gains("tanh", rng.normal(size=(L, H)).astype(np.float32),
                       rng.normal(size=(L, H, D)).astype(np.float32) * 0.1, 0.5)
    path = str(tmp_path / "gains.safetensors")
    prefixcl.write_gains(path, g)
    back = prefixcl.read_gains(path, L, H, D)
    assert back.gain_mode == "tanh" and back.gain_ramp == 0.5
    np.testing.assert_array_equal(back.gains, g.gains)
    np.testing.assert_array_equal(back.dim_gains, g.dim_gains)
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.read_gains(path, L, H + 1, D)
    assert e.value.name == "PFX_ERROR_INVALID_SHAPE"
    # The adapter bank reads the file and applies its gains at ramp 1.
    with prefixcl.load_model(runtime, str(GEN / "gpt2")) as m, prefixcl.AdapterBank(m, 1) as bank:
        bank.add(path)
        ids = [[5, 17, 3, 44, 9]]
        np.testing.assert_allclose(m.forward(ids, prefix=bank.prefix([0])),
                                   m.forward(ids, prefix=back.prefix()), rtol=1e-6, atol=1e-6)
        assert not np.allclose(m.forward(ids), m.forward(ids, prefix=back.prefix()))


def test_safetensors_round_trip(tmp_path):
    path = str(tmp_path / "x.safetensors")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    prefixcl.write_safetensors(path, {"a": a, "b": [1.5]}, {"k": "v"}, dtype="bf16")
    tensors, meta = prefixcl.read_safetensors(path)
    assert meta == {"k": "v"}
    np.testing.assert_array_equal(tensors["a"], a)
    assert tensors["b"].tolist() == [1.5]
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.read_safetensors(str(tmp_path / "missing.safetensors"))
    assert e.value.name == "PFX_ERROR_IO"
