"""The jobs of tune.h, pretrain.h and eval.h: the CLI's options as keyword
arguments, and a Python callable called after each step (or evaluation
batch).

The callable gets a Step (or EvalProgress); returning False stops the job at
the next step boundary, with the checkpoint written as a stop of the CLI
writes it (`resume=True` continues from it). Ctrl-C (KeyboardInterrupt) and
any exception the callable raises stop the job the same way; the exception
is raised again once the job has returned, the checkpoint written. (Ctrl-C
is caught so only in the main thread while Python's own SIGINT handler is
in place.)"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ._core import (C, Runtime, Status, check, dtype_code, gain_mode_code, lib, refuse,
                    sigint_stops, text)
from .model import HeadStats, ModelShape, head_stats_of, model_batch


def _set_options(cfg: Any, options: Dict[str, Any], kind: str, renamed: Dict[str, str]) -> list:
    """Writes keyword options into a config struct; returns what must stay alive."""
    names = {n for n, _ in cfg._fields_} - {"stop_flag", "dist", "gain_heads", "gain_head_count"}
    keep = []
    for key, value in options.items():
        field = renamed.get(key, key)
        if field not in names:
            raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT, f"{key}: not an option of {kind}")
        if value is None:
            continue
        if field == "storage":
            value = dtype_code(value)
        elif field == "gain_mode":
            value = gain_mode_code(value)
        elif field.endswith(("_dir", "_path")) or field == "freeze":
            value = text(value)
            keep.append(value)
        try:
            setattr(cfg, field, value)
        except (TypeError, ValueError) as e:
            raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT, f"{key}: {e}") from None
    return keep


def _from_c(cls: Any, c: Any) -> Any:
    return cls(**{f.name: getattr(c, f.name) for f in fields(cls) if hasattr(c, f.name)})


def _array(pointer: Any, count: int, shape: Optional[Tuple[int, ...]] = None) -> Optional[np.ndarray]:
    if not pointer or count == 0:
        return None
    a = np.ctypeslib.as_array(pointer, (count,)).copy()
    return a.reshape(shape) if shape else a


def _curve(pointer: Any, count: int) -> np.ndarray:
    """A result's per-step array (empty when no step ran)."""
    a = _array(pointer, count)
    return a if a is not None else np.empty(0)


def _step_gains(step: Any) -> Optional[np.ndarray]:
    """The per-head gains [L, H] the step left, when the job trains some."""
    prefix = step.prefix
    if not prefix or not prefix.contents.gains or not step.ctx:
        return None
    s = C["pfx_model_shape"]()
    if lib.pfx_model_get_shape(lib.pfx_context_model(step.ctx), ctypes.byref(s)) != 0:
        return None
    return _array(prefix.contents.gains, s.layers * s.heads, (s.layers, s.heads))


class _StepModel:
    """The job's context over its model with the prefix and gains a step
    left, for forward-only calls during the step's callback."""

    def __init__(self, runtime: Runtime, step: Any):
        self.runtime, self.ctx, self.prefix = runtime, step.ctx, step.prefix
        self.shape = C["pfx_model_shape"]()
        check(lib.pfx_model_get_shape(lib.pfx_context_model(step.ctx), ctypes.byref(self.shape)),
              runtime)
        self.open = True

    def live(self) -> None:
        if not self.open:
            raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                         "step: its model calls are valid during the callback only")


class _StepCalls:
    """Forward-only calls in the job's own context, with the prefixes and
    gains as the step left them, during the callback only (leaving the run
    bit for bit as it would be): at most the job's batch rows and its
    max_length (tuning) or block (pre-training) tokens."""
    _model: Any

    def head_stats(self, ids: Any, lens: Any = None, *, top_k: int = 8) -> HeadStats:
        """Attention mass on the prefix, entropy and top-k mass, [L, H] each."""
        m = self._model
        m.live()
        batch, keep = model_batch(ids, lens)
        return head_stats_of(m.runtime, m.ctx, batch, m.prefix, m.shape.layers, m.shape.heads,
                             top_k)

    def loss_of(self, ids: Any, lens: Any = None, labels: Any = None) -> float:
        """The causal-LM loss of a batch (the field `loss` is the step's own)."""
        m = self._model
        m.live()
        batch, keep = model_batch(ids, lens, labels)
        out = ctypes.c_double()
        check(lib.pfx_model_loss(m.ctx, batch, m.prefix, ctypes.byref(out)), m.runtime)
        return out.value


class _Job:
    """Runs a job with a stop flag, set by the Python callable behind its
    callback (False, an exception) or by Ctrl-C."""

    def __init__(self, callback_type: Any, convert: Callable[[Any], Any],
                 on_step: Optional[Callable[[Any], Any]], runtime: Optional[Runtime] = None):
        self.flag = ctypes.c_int(0)
        self.runtime = runtime
        self.error: Optional[BaseException] = None
        self.interrupted = False
        self.convert, self.on_step = convert, on_step
        self.callback = callback_type(self._called)

    def run(self, call: Callable[[Any], int]) -> int:
        with sigint_stops(self.flag) as sigint:
            status = call(self.callback)
        self.interrupted = sigint["hit"]
        return status

    def _called(self, step: Any, user: Any) -> None:
        model = None
        try:
            if self.on_step is None:
                return
            seen = self.convert(step.contents)
            if self.runtime is not None:
                model = seen._model = _StepModel(self.runtime, step.contents)
            if self.on_step(seen) is False:
                self.flag.value = 1
        except BaseException as e:  # stop at the step boundary, raise after the job
            self.flag.value = 1
            if self.error is None:
                self.error = e
        finally:
            if model is not None:
                model.open = False

    def finish(self) -> None:
        if self.error is not None:
            raise self.error
        if self.interrupted:
            raise KeyboardInterrupt


@dataclass
class TuneStep(_StepCalls):
    """What the callable sees after each tuning step (pfx_tune_step), and
    head_stats() and loss_of() in the job's context with the step's prefixes."""
    step: int
    steps: int
    epoch: int
    max_length: int
    loss: float
    grad_norm: float
    skipped: bool
    lr_factor: float
    gain_ramp: float
    tokens_per_s: float
    eta_s: float
    gains: Optional[np.ndarray] = None  # [L, H] with a gain
    _model: Any = field(default=None, repr=False, compare=False)


@dataclass
class TuneResult:
    """What the tuning job returns (pfx_tune_result); arrays are numpy."""
    steps: int
    steps_done: int
    first_step: int
    stopped: bool
    losses: np.ndarray  # [steps_done]: the loss of each step
    grad_norms: np.ndarray
    eval_before: float
    eval_after: float  # NaN when stopped
    train_examples: int
    eval_examples: int
    eval_tokens: int
    max_length: int
    gains: Optional[np.ndarray]  # [L, H] with a gain
    mass_before: Optional[np.ndarray]  # [L, H] attention mass on the prefix
    mass_after: Optional[np.ndarray]
    seconds: float
    out_dir: str


_TUNE_NAMES = {"model": "model_dir", "tokenizer": "tokenizer_dir", "data": "data_path",
               "eval_data": "eval_path", "out": "out_dir"}


def tune(runtime: Runtime, model: str, data: str, out: str, *,
         on_step: Optional[Callable[[TuneStep], Optional[bool]]] = None,
         **options: Any) -> TuneResult:
    """Prefix-tunes the frozen model folder `model` on `data` (text or
    JSONL) into `out` (a PEFT adapter, gains.safetensors with a gain,
    loss.csv, checkpoint.safetensors), as `prefixcl tune` does.

    Options (tune.h, pfx_tune_config; defaults as the CLI's): tokenizer,
    eval_data, prefix_len, hidden (0: direct prefixes), epochs, steps, batch,
    max_length, lr, gain_lr, gain_mode ("off", "linear", "tanh"),
    gain_ramp_steps, weight_decay, max_grad_norm, warmup_steps, seed,
    storage ("f32", "f16", "bf16", "q8_0"), checkpoint_every, resume,
    stop_after."""
    cfg = C["pfx_tune_config"]()
    lib.pfx_tune_default_config(ctypes.byref(cfg))
    keep = _set_options(cfg, dict(options, model=model, data=data, out=out), "tune", _TUNE_NAMES)

    def convert(s: Any) -> TuneStep:
        return TuneStep(**{f.name: getattr(s, f.name) for f in fields(TuneStep)
                           if f.name not in ("gains", "_model")}, gains=_step_gains(s))

    job = _Job(C["pfx_tune_step_fn"], convert, on_step, runtime)
    cfg.stop_flag = ctypes.pointer(job.flag)
    r = C["pfx_tune_result"]()
    status = job.run(lambda cb: lib.pfx_tune_run(runtime._live(), ctypes.byref(cfg), cb, None,
                                                 ctypes.byref(r)))
    try:
        job.finish()
        check(status, runtime)
        L, H = r.shape.layers, r.shape.heads
        result = TuneResult(
            r.steps, r.steps_done, r.first_step, r.stopped,
            _curve(r.losses, r.steps_done), _curve(r.grad_norms, r.steps_done),
            r.eval_before, r.eval_after, r.train_examples, r.eval_examples, r.eval_tokens,
            r.max_length, _array(r.gains, r.gain_params, (L, H)), _array(r.mass_before, L * H, (L, H)),
            _array(r.mass_after, L * H, (L, H)), r.seconds, str(out))
    finally:
        lib.pfx_tune_result_free(ctypes.byref(r))
    return result


@dataclass
class PretrainStep(_StepCalls):
    """What the callable sees after each pre-training step (pfx_pretrain_step),
    and head_stats() and loss_of() on the model as the step left it."""
    step: int
    steps: int
    epoch: int
    loss: float
    grad_norm: float
    skipped: bool
    lr_factor: float
    gain_ramp: float
    eval_loss: float  # NaN unless evaluated after this step
    tokens_per_s: float
    eta_s: float
    gains: Optional[np.ndarray] = None  # [L, H] with a per-head gain
    _model: Any = field(default=None, repr=False, compare=False)


@dataclass
class PretrainResult:
    """What the pre-training job returns (pfx_pretrain_result)."""
    steps: int
    steps_done: int
    first_step: int
    stopped: bool
    losses: np.ndarray  # [steps_done]
    grad_norms: np.ndarray
    eval_losses: np.ndarray  # [steps + 1]: after step s at s (0: before); NaN where not measured
    gains: Optional[np.ndarray]  # [steps + 1, L, H]: each head's gain after each step
    train_blocks: int
    eval_blocks: int
    tokens_per_step: int
    trained_weights: int
    trained_values: int
    shape: ModelShape
    seconds: float
    out_dir: str


_PRETRAIN_NAMES = {"model": "model_dir", "config": "config_dir", "tokenizer": "tokenizer_dir",
                   "data": "data_path", "eval_data": "eval_path", "out": "out_dir"}


def pretrain(runtime: Runtime, data: str, out: str, *, model: Optional[str] = None,
             config: Optional[str] = None, gain_heads: Optional[Sequence[Tuple[int, int]]] = None,
             on_step: Optional[Callable[[PretrainStep], Optional[bool]]] = None,
             **options: Any) -> PretrainResult:
    """Trains every weight (and the gains) of the folder `model`, or of a new
    model from `config`/config.json, on `data` into `out` (the model,
    gains.safetensors, loss.csv, checkpoint.safetensors), as `prefixcl
    pretrain` does.

    Options (pretrain.h, pfx_pretrain_config; defaults the recipe's):
    tokenizer, eval_data, block, batch, accumulate, steps, epochs, lr,
    gain_lr, weight_decay, no_decay_norms, max_grad_norm, warmup_steps,
    min_lr_ratio, gain_mode, structured_gain, gain_ramp_steps, freeze,
    eval_every, eval_blocks, checkpoint_every, recompute, seed, resume,
    stop_after; gain_heads: [(layer, head), ...] the heads with a trained
    gain (None: all)."""
    cfg = C["pfx_pretrain_config"]()
    lib.pfx_pretrain_default_config(ctypes.byref(cfg))
    keep = _set_options(cfg, dict(options, model=model, config=config, data=data, out=out),
                        "pretrain", _PRETRAIN_NAMES)
    if gain_heads is not None:
        heads = [tuple(int(v) for v in h) for h in gain_heads]
        if any(len(h) != 2 for h in heads):
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE, "gain_heads: (layer, head) pairs expected")
        array = (C["pfx_layer_head"] * max(len(heads), 1))(*heads)
        keep.append(array)
        cfg.gain_heads, cfg.gain_head_count = array, len(heads)

    def convert(s: Any) -> PretrainStep:
        return PretrainStep(**{f.name: getattr(s, f.name) for f in fields(PretrainStep)
                               if f.name not in ("gains", "_model")}, gains=_step_gains(s))

    job = _Job(C["pfx_pretrain_step_fn"], convert, on_step, runtime)
    cfg.stop_flag = ctypes.pointer(job.flag)
    r = C["pfx_pretrain_result"]()
    status = job.run(lambda cb: lib.pfx_pretrain_run(runtime._live(), ctypes.byref(cfg), cb,
                                                     None, ctypes.byref(r)))
    try:
        job.finish()
        check(status, runtime)
        L, H = r.shape.layers, r.shape.heads
        result = PretrainResult(
            r.steps, r.steps_done, r.first_step, r.stopped, _curve(r.losses, r.steps_done),
            _curve(r.grad_norms, r.steps_done), _curve(r.eval_losses, r.steps + 1),
            _array(r.gains, (r.steps + 1) * L * H, (r.steps + 1, L, H)), r.train_blocks,
            r.eval_blocks, r.tokens_per_step, r.trained_weights, r.trained_values,
            ModelShape._from_c(r.shape), r.seconds, str(out))
    finally:
        lib.pfx_pretrain_result_free(ctypes.byref(r))
    return result


@dataclass
class EvalProgress:
    """What the callable sees after each evaluation batch (pfx_eval_progress)."""
    pass_: int
    passes: int
    batch: int
    batches: int
    tokens: int
    loss: float


@dataclass
class EvalResult:
    """The held-out loss and perplexity (pfx_eval_result)."""
    loss: float
    perplexity: float
    adapter_loss: float  # NaN without an adapter
    adapter_perplexity: float
    passes: int
    passes_done: int
    batches: int
    batches_done: int
    examples: int
    tokens: int
    max_length: int
    prefix_len: int
    stopped: bool
    seconds: float


_EVAL_NAMES = {"model": "model_dir", "tokenizer": "tokenizer_dir", "adapter": "adapter_path",
               "data": "data_path"}


def evaluate(runtime: Runtime, model: str, data: str, *, adapter: Optional[str] = None,
             on_batch: Optional[Callable[[EvalProgress], Optional[bool]]] = None,
             **options: Any) -> EvalResult:
    """The causal-LM loss and perplexity of the folder `model` on `data`, and
    with `adapter` (a PEFT folder, its safetensors file, or a gains file) a
    second pass with it, as `prefixcl eval` prints them. Options: tokenizer,
    batch, max_length, storage. on_batch returning False stops (the pass it
    interrupts gives no loss)."""
    cfg = C["pfx_eval_config"]()
    lib.pfx_eval_default_config(ctypes.byref(cfg))
    keep = _set_options(cfg, dict(options, model=model, data=data, adapter=adapter), "evaluate",
                        _EVAL_NAMES)

    def convert(p: Any) -> EvalProgress:
        return EvalProgress(getattr(p, "pass"), p.passes, p.batch, p.batches, p.tokens, p.loss)

    job = _Job(C["pfx_eval_progress_fn"], convert, on_batch)
    cfg.stop_flag = ctypes.pointer(job.flag)
    r = C["pfx_eval_result"]()
    status = job.run(lambda cb: lib.pfx_eval_run(runtime._live(), ctypes.byref(cfg), cb, None,
                                                 ctypes.byref(r)))
    job.finish()
    check(status, runtime)
    return _from_c(EvalResult, r)
