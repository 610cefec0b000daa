"""Whole models (model.h): Hugging Face folders loaded onto a runtime, and
their forward, loss, hidden states, head statistics and attention maps as
numpy float32 arrays."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ._core import (C, GAIN_MODE_NAMES, Runtime, Status, Tensor, check, dtype_code,
                    float32_array, gain_mode_code, int32_array, lib, ptr, refuse, text)


@dataclass(frozen=True)
class ModelShape:
    """What config.json says (pfx_model_shape)."""
    model_type: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    max_positions: int
    tied_embeddings: bool
    parameters: int
    eos_ids: Tuple[int, ...]

    @classmethod
    def _from_c(cls, s: Any) -> "ModelShape":
        return cls(s.model_type.decode(), s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden,
                   s.intermediate, s.vocab, s.max_positions, s.tied_embeddings, s.parameters,
                   tuple(s.eos_ids[:s.eos_count]))


def read_config(path: str) -> ModelShape:
    """The shape of path/config.json, without loading weights."""
    s = C["pfx_model_shape"]()
    check(lib.pfx_model_read_config(text(path), ctypes.byref(s)))
    return ModelShape._from_c(s)


class Prefix:
    """The per-layer prefixes and gains a model call attends with
    (pfx_model_prefix).

    keys, values: one Tensor per layer, [Hkv, P, D]; gains: [L, H] (a gain
    per head, read with gain_mode "linear" or "tanh"); dim_gains: [L, H, D]
    (the structured gain); gain_ramp: r in [0, 1]. Prefix() is the frozen
    model. load_peft() and AdapterBank.prefix() make them from files."""

    def __init__(self, keys: Optional[Sequence[Tensor]] = None,
                 values: Optional[Sequence[Tensor]] = None, *, gains: Any = None,
                 gain_mode: Optional[str] = None, dim_gains: Any = None,
                 gain_ramp: float = 1.0):
        if (keys is None) != (values is None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "keys, values: give both or neither")
        self.keys = list(keys) if keys is not None else []
        self.values = list(values) if values is not None else []
        if len(self.keys) != len(self.values):
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"values: {len(self.values)} tensors for {len(self.keys)} keys")
        if gain_mode is None:
            gain_mode = "linear" if gains is not None else "off"
        self.gain_mode = GAIN_MODE_NAMES[gain_mode_code(gain_mode)]
        self.gains = None if gains is None else float32_array(gains, "gains", ndim=2)
        self.dim_gains = None if dim_gains is None else float32_array(dim_gains, "dim_gains",
                                                                      ndim=3)
        self.gain_ramp = float(gain_ramp)

    @property
    def prefix_len(self) -> int:
        """P (0 without prefix tensors)."""
        return self.keys[0].shape[-2] if self.keys else 0

    def _c(self, shape: ModelShape, batch: int) -> Tuple[Any, list]:
        L, H, D = shape.layers, shape.heads, shape.head_dim
        p = C["pfx_model_prefix"]()
        keep: list = []
        if self.keys:
            if len(self.keys) != L:
                raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                             f"prefix.keys: {len(self.keys)} tensors for a model of {L} layers")
            T = ctypes.POINTER(C["pfx_tensor"])
            k = (T * L)(*[t._live() for t in self.keys])
            v = (T * L)(*[t._live() for t in self.values])
            keep += [k, v]
            p.prefix_len, p.keys, p.values = self.prefix_len, k, v
        if self.gains is not None and self.gains.shape != (L, H):
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"prefix.gains: shape ({L}, {H}) expected, got {self.gains.shape}")
        if self.dim_gains is not None and self.dim_gains.shape != (L, H, D):
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"prefix.dim_gains: shape ({L}, {H}, {D}) expected, "
                         f"got {self.dim_gains.shape}")
        p.gain_mode = gain_mode_code(self.gain_mode)
        p.gains = ptr(self.gains, ctypes.c_float)
        p.dim_gains = ptr(self.dim_gains, ctypes.c_float)
        p.gain_ramp = self.gain_ramp
        return p, keep

    def close(self) -> None:
        """Frees the prefix tensors."""
        for t in self.keys + self.values:
            t.close()

    def __enter__(self) -> "Prefix":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def model_batch(ids: Any, lens: Any = None, labels: Any = None) -> Tuple[Any, tuple]:
    """A pfx_model_batch of ids [B, N] (or [N]), lens [B], labels [B, N],
    and the arrays it points into."""
    a = int32_array(ids, "ids")
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                     f"ids: [B, N] expected (B, N >= 1), got shape {np.shape(ids)}")
    B, N = a.shape
    ln = None if lens is None else int32_array(lens, "lens", shape=(B,))
    lb = None if labels is None else int32_array(labels, "labels", shape=(B, N))
    batch = C["pfx_model_batch"](B, N, ptr(a, ctypes.c_int32), ptr(ln, ctypes.c_int32),
                                 ptr(lb, ctypes.c_int32))
    return batch, (a, ln, lb)


def head_stats_of(runtime: Runtime, ctx: Any, batch: Any, prefix: Any, layers: int, heads: int,
                  top_k: int) -> "HeadStats":
    """pfx_model_head_stats into three [L, H] arrays."""
    out = [np.empty((layers, heads), dtype=np.float32) for _ in range(3)]
    f = ctypes.c_float
    check(lib.pfx_model_head_stats(ctx, batch, prefix, int(top_k), ptr(out[0], f),
                                   ptr(out[1], f), ptr(out[2], f)), runtime)
    return HeadStats(*out)


class HeadStats(NamedTuple):
    """Per layer and head [L, H], averaged over the valid rows."""
    prefix_mass: np.ndarray
    entropy: np.ndarray
    top_k_mass: np.ndarray


class Model:
    """A decoder-only model on a runtime (pfx_model) with the workspace its
    calls run in (a pfx_context, grown to the largest batch, length and
    prefix seen). Token ids are [B, N] (right-padded; [N] is one item),
    lens [B] the valid tokens of each item (None: all N), labels [B, N]
    Hugging Face labels (None: the ids; -100 not counted). Arrays come back
    float32, C order, in the shapes model.h documents."""

    def __init__(self, runtime: Runtime, path: str, *, storage: str = "f32",
                 _init_seed: Optional[int] = None):
        self._handle: Any = None
        self._ctx: Any = None
        self._capacity = (0, 0, 0)
        params = C["pfx_model_params"](storage=dtype_code(storage))
        handle = ctypes.POINTER(C["pfx_model"])()
        if _init_seed is None:
            status = lib.pfx_model_load(runtime._live(), text(path), ctypes.byref(params),
                                        ctypes.byref(handle))
        else:
            status = lib.pfx_model_init(runtime._live(), text(path), ctypes.byref(params),
                                        _init_seed, ctypes.byref(handle))
        check(status, runtime)
        self.runtime = runtime
        self._handle = handle
        s = C["pfx_model_shape"]()
        check(lib.pfx_model_get_shape(handle, ctypes.byref(s)), runtime)
        self.shape = ModelShape._from_c(s)
        runtime._adopt(self)

    @classmethod
    def init(cls, runtime: Runtime, config_dir: str, *, seed: int = 1,
             storage: str = "f32") -> "Model":
        """A new model from config_dir/config.json, initialized as
        transformers initializes the family (pfx_model_init)."""
        return cls(runtime, config_dir, storage=storage, _init_seed=seed)

    def __repr__(self) -> str:
        s = self.shape if getattr(self, "_handle", None) else None
        if s is None:
            return "<prefixcl.Model closed>"
        return (f"<prefixcl.Model {s.model_type}: {s.layers} layers, {s.heads} heads "
                f"({s.kv_heads} kv), hidden {s.hidden}, vocab {s.vocab}>")

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "model: closed")
        return self._handle

    def _context(self, B: int, N: int, P: int) -> Any:
        b, n, p = self._capacity
        if self._ctx is None or B > b or N > n or P > p:
            self._close_context()
            cap = (max(B, b), max(N, n), max(P, p))
            params = C["pfx_context_params"](max_batch=cap[0], max_tokens=cap[1],
                                             max_prefix_len=cap[2])
            ctx = ctypes.POINTER(C["pfx_context"])()
            check(lib.pfx_context_create(self._live(), ctypes.byref(params), ctypes.byref(ctx)),
                  self.runtime)
            self._ctx, self._capacity = ctx, cap
        return self._ctx

    def _close_context(self) -> None:
        if self._ctx:
            lib.pfx_context_destroy(ctypes.byref(self._ctx))
        self._ctx, self._capacity = None, (0, 0, 0)

    def _call(self, ids: Any, lens: Any, labels: Any, prefix: Optional[Prefix]) -> Tuple:
        """The context, batch, prefix structs and what must stay alive."""
        batch, arrays = model_batch(ids, lens, labels)
        prefix = prefix if prefix is not None else Prefix()
        pc, keep = prefix._c(self.shape, batch.batch)
        ctx = self._context(batch.batch, batch.tokens, prefix.prefix_len)
        return ctx, batch, pc, (arrays, keep, prefix)

    def _to_host(self, shape: Sequence[int], run: Any) -> np.ndarray:
        with Tensor(self.runtime, shape) as out:
            check(run(out._handle), self.runtime)
            return out.numpy()

    def forward(self, ids: Any, lens: Any = None, *, prefix: Optional[Prefix] = None) -> np.ndarray:
        """Logits [B, N, V] (pfx_model_forward)."""
        ctx, b, p, keep = self._call(ids, lens, None, prefix)
        return self._to_host((b.batch, b.tokens, self.shape.vocab),
                             lambda t: lib.pfx_model_forward(ctx, b, p, t))

    def last_logits(self, ids: Any, lens: Any = None, *,
                    prefix: Optional[Prefix] = None) -> np.ndarray:
        """Logits [B, V] of each item's last valid token (pfx_model_last_logits)."""
        ctx, b, p, keep = self._call(ids, lens, None, prefix)
        return self._to_host((b.batch, self.shape.vocab),
                             lambda t: lib.pfx_model_last_logits(ctx, b, p, t))

    def loss(self, ids: Any, lens: Any = None, labels: Any = None, *,
             prefix: Optional[Prefix] = None) -> float:
        """Hugging Face's causal-LM loss: the mean over counted labels (pfx_model_loss)."""
        ctx, b, p, keep = self._call(ids, lens, labels, prefix)
        out = ctypes.c_double()
        check(lib.pfx_model_loss(ctx, b, p, ctypes.byref(out)), self.runtime)
        return out.value

    def hidden_states(self, ids: Any, lens: Any = None, *,
                      prefix: Optional[Prefix] = None) -> np.ndarray:
        """The final norm's output [B, N, C] (pfx_model_hidden_states)."""
        ctx, b, p, keep = self._call(ids, lens, None, prefix)
        return self._to_host((b.batch, b.tokens, self.shape.hidden),
                             lambda t: lib.pfx_model_hidden_states(ctx, b, p, t))

    def head_stats(self, ids: Any, lens: Any = None, *, prefix: Optional[Prefix] = None,
                   top_k: int = 8) -> HeadStats:
        """Attention mass on the prefix, entropy and top-k mass per layer and
        head, each [L, H] (pfx_model_head_stats; top_k in 1..32)."""
        ctx, b, p, keep = self._call(ids, lens, None, prefix)
        return head_stats_of(self.runtime, ctx, b, p, self.shape.layers, self.shape.heads,
                             top_k)

    def attention_map(self, ids: Any, lens: Any = None, *, item: int = 0, layer: int = 0,
                      head: int = 0, prefix: Optional[Prefix] = None) -> np.ndarray:
        """Attention probabilities [N, P + N] of one head of one layer for one
        batch item, prefix columns first (pfx_model_attention_probs)."""
        ctx, b, p, keep = self._call(ids, lens, None, prefix)
        P = keep[-1].prefix_len
        return self._to_host((b.tokens, P + b.tokens), lambda t: lib.pfx_model_attention_probs(
            ctx, b, p, int(item), int(layer), int(head), t))

    def generate(self, prompts: Sequence[Any], **options: Any) -> list:
        """prefixcl.generate(self, prompts, ...): adapters=, max_new_tokens=,
        temperature=, top_k=, top_p=, stop=, seed=, tokenizer=, bank=,
        on_token=, kv_dtype=."""
        from .generate import generate
        return generate(self, prompts, **options)

    def close(self) -> None:
        """Releases the workspace and the weights (idempotent)."""
        self._close_context()
        if getattr(self, "_handle", None):
            lib.pfx_model_destroy(ctypes.byref(self._handle))
            self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def load_model(runtime: Runtime, path: str, *, storage: str = "f32") -> Model:
    """Loads a Hugging Face folder (storage "f32", "f16", "bf16" or "q8_0")."""
    return Model(runtime, path, storage=storage)
