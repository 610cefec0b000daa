"""The tuning, pre-training and evaluation jobs from Python: keyword options,
the step callable, its stop (False), Ctrl-C (KeyboardInterrupt) and resume,
on the tiny GPT-2 of tests/fixtures/generate and data/demo."""
import math
import signal

import numpy as np
import pytest

import prefixcl

from conftest import FIXTURES

ROOT = FIXTURES.parents[1]
GPT2 = str(FIXTURES / "generate" / "gpt2")
TRAIN, EVAL = str(ROOT / "data/demo/train.txt"), str(ROOT / "data/demo/eval.txt")
TUNE = dict(eval_data=EVAL, prefix_len=4, hidden=16, batch=4, max_length=32, steps=4,
            warmup_steps=1)
PRETRAIN = dict(config=str(ROOT / "examples/tiny-gpt2"), tokenizer=str(ROOT / "data/demo"),
                block=32, batch=4, steps=4, lr=3e-3, warmup_steps=1, gain_mode="linear",
                gain_ramp_steps=2, eval_blocks=4)


@pytest.fixture(scope="module")
def tuned(runtime, tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    seen = []
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(out), on_step=seen.append, **TUNE)
    return r, out, seen


def test_tune(runtime, tuned):
    r, out, seen = tuned
    assert [s.step for s in seen] == [1, 2, 3, 4] and seen[-1].steps == 4
    assert not r.stopped and r.steps_done == 4
    np.testing.assert_array_equal(r.losses, [s.loss for s in seen])
    assert r.gains is None and r.mass_after.shape == (2, 3)
    for name in ("adapter_config.json", "adapter_model.safetensors", "loss.csv",
                 "checkpoint.safetensors"):
        assert (out / name).is_file()
    assert prefixcl.read_peft_config(str(out)).num_virtual_tokens == 4
    # The evaluation job scores the adapter as the job's last evaluation did.
    e = prefixcl.evaluate(runtime, GPT2, EVAL, adapter=str(out), max_length=r.max_length)
    assert e.prefix_len == 4 and e.tokens == r.eval_tokens
    assert abs(e.adapter_loss - r.eval_after) < 1e-5 * r.eval_after
    assert math.isclose(e.perplexity, math.exp(e.loss))


def test_calls_in_the_step(runtime, tuned, tmp_path):
    # Forward-only calls in the job's context leave the run bit for bit the same.
    ids = [[5, 17, 3, 44, 9, 8], [71, 2, 30, 30, 8, 61]]
    masses, steps = [], []

    def look(step):
        masses.append(step.head_stats(ids, top_k=2).prefix_mass)
        assert np.isfinite(step.loss_of(ids))
        steps.append(step)
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), on_step=look, **TUNE)
    np.testing.assert_array_equal(r.losses, tuned[0].losses)
    assert len(masses) == 4 and masses[0].shape == (2, 3) and np.all(masses[-1] > 0)
    with pytest.raises(prefixcl.Error, match="during the callback only"):
        steps[0].head_stats(ids)


def test_stop_and_resume_as_one_run(runtime, tuned, tmp_path):
    full = tuned[0]
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), on_step=lambda s: s.step < 2, **TUNE)
    assert r.stopped and r.steps_done == 2 and math.isnan(r.eval_after)
    assert (tmp_path / "checkpoint.safetensors").is_file()
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), resume=True, **TUNE)
    assert r.first_step == 2 and r.steps_done == 4
    np.testing.assert_array_equal(r.losses, full.losses)  # bit for bit
    assert r.eval_after == full.eval_after


def test_keyboard_interrupt_writes_the_checkpoint(runtime, tuned, tmp_path):
    def ctrl_c(step):
        signal.raise_signal(signal.SIGINT)  # as a Ctrl-C during the step
    with pytest.raises(KeyboardInterrupt):
        prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), on_step=ctrl_c, **TUNE)
    assert (tmp_path / "checkpoint.safetensors").is_file()
    rows = (tmp_path / "loss.csv").read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["0", "1"]  # the evaluation before, step 1
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), resume=True, **TUNE)
    assert r.first_step == 1
    np.testing.assert_array_equal(r.losses, tuned[0].losses)


def test_ctrl_c_from_outside_stops_at_a_step(runtime, tmp_path):
    # SIGINT while the job runs in C, no callable: the next step boundary stops it.
    import os
    import threading
    import time
    seen = []

    def ctrl_c_when_running():
        while not seen:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=ctrl_c_when_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), on_step=seen.append,
                      **dict(TUNE, steps=200))
    assert 1 <= len(seen) < 200 and (tmp_path / "checkpoint.safetensors").is_file()
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), resume=True, stop_after=len(seen) + 1,
                      **dict(TUNE, steps=200))
    assert r.first_step == len(seen) and r.stopped
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_callback_error_stops_and_raises(runtime, tmp_path):
    def broken(step):
        raise ValueError("from the callback")
    with pytest.raises(ValueError, match="from the callback"):
        prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), on_step=broken, **TUNE)
    assert (tmp_path / "checkpoint.safetensors").is_file()


def test_tune_with_gains(runtime, tmp_path):
    gains = []
    r = prefixcl.tune(runtime, GPT2, TRAIN, str(tmp_path), gain_mode="tanh", gain_ramp_steps=2,
                      on_step=lambda s: gains.append(s.gains), **TUNE)
    assert r.gains.shape == (2, 3) and np.any(r.gains != 0)
    np.testing.assert_array_equal(gains[-1], r.gains)
    g = prefixcl.read_gains(str(tmp_path), 2, 3, 16)
    assert g.gain_mode == "tanh" and g.dim_gains is None
    np.testing.assert_array_equal(g.gains, r.gains)


def test_job_refusals(runtime, tmp_path):
    out = tmp_path / "never"
    cases = [(dict(prefix_lenght=4), "PFX_ERROR_INVALID_ARGUMENT", "prefix_lenght"),
             (dict(gain_mode="cubic"), "PFX_ERROR_INVALID_ARGUMENT", "gain_mode"),
             (dict(lr="fast"), "PFX_ERROR_INVALID_ARGUMENT", "lr"),
             (dict(storage="int4"), "PFX_ERROR_INVALID_ARGUMENT", "storage")]
    for kw, status, name in cases:
        with pytest.raises(prefixcl.Error) as e:
            prefixcl.tune(runtime, GPT2, TRAIN, str(out), **kw)
        assert e.value.name == status and e.value.message.startswith(name), e.value
    with pytest.raises(prefixcl.Error) as e:  # the job's own check, before anything is written
        prefixcl.tune(runtime, GPT2, TRAIN, str(out), prefix_len=10**6)
    assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT" and "prefix_len" in e.value.message
    assert not out.exists()
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.evaluate(runtime, GPT2, str(tmp_path / "no-such-data.txt"))
    assert e.value.name == "PFX_ERROR_IO"


def test_evaluate_stops(runtime):
    e = prefixcl.evaluate(runtime, GPT2, EVAL, max_length=32, on_batch=lambda p: p.batch < 2)
    assert e.stopped and e.batches_done == 2 and math.isnan(e.loss)


def test_pretrain_with_gains(runtime, tmp_path):
    seen, losses = [], []

    def look(step):
        seen.append(step)
        losses.append(step.loss_of([list(range(1, 33))] * 2))
    r = prefixcl.pretrain(runtime, TRAIN, str(tmp_path), on_step=look, **PRETRAIN)
    assert np.all(np.isfinite(losses))
    L, H = r.shape.layers, r.shape.heads
    assert r.steps_done == 4 and [s.step for s in seen] == [1, 2, 3, 4]
    assert r.gains.shape == (5, L, H) and np.all(r.gains[0] == 0) and np.any(r.gains[-1] != 0)
    assert np.isfinite(r.eval_losses[0]) and np.isfinite(r.eval_losses[-1])
    np.testing.assert_array_equal(seen[-1].gains, r.gains[-1])
    g = prefixcl.read_gains(str(tmp_path), L, H, r.shape.head_dim)
    assert g.gain_mode == "linear"
    np.testing.assert_array_equal(g.gains, r.gains[-1])
    # The folder is a model the package loads.
    with prefixcl.load_model(runtime, str(tmp_path)) as m:
        assert m.shape.layers == L


def test_pretrain_selected_heads_and_stop(runtime, tmp_path):
    r = prefixcl.pretrain(runtime, TRAIN, str(tmp_path), gain_heads=[(0, 1)],
                          on_step=lambda s: s.step < 3, **PRETRAIN)
    assert r.stopped and r.steps_done == 3
    mask = np.zeros(r.gains.shape[1:], dtype=bool)
    mask[0, 1] = True
    assert np.all(r.gains[:, ~mask] == 0) and np.any(r.gains[r.steps_done, mask] != 0)
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.pretrain(runtime, TRAIN, str(tmp_path / "x"), gain_heads=[(0, 99)], **PRETRAIN)
    assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT" and "gain_heads" in e.value.message
