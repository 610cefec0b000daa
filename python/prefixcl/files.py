"""Files (io.h): safetensors read and written, PEFT prefix-tuning adapter
folders, and the gains files that tuning and pre-training write."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ._core import (C, GAIN_MODE_NAMES, Runtime, Status, Tensor, check, dtype_code,
                    float32_array, gain_mode_code, lib, ptr, refuse, text)
from .model import Prefix

# pfx_st_dtype -> numpy dtype of the raw little-endian data (None: read as float32).
_ST_NUMPY = {0: "<f4", 1: "<f2", 2: None, 3: "<f8", 4: "<i8", 5: "<i4", 6: "<i2", 7: "i1",
             8: "<u8", 9: "<u4", 10: "<u2", 11: "u1", 12: "?", 13: None, 14: None}
GAINS_FORMAT = "prefixcl-gains-1"


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Every tensor of a safetensors file (validated by the library's reader)
    as numpy arrays in their own dtype (BF16 and F8 as float32), and the
    metadata."""
    f = ctypes.POINTER(C["pfx_safetensors"])()
    check(lib.pfx_safetensors_open(text(path), ctypes.byref(f)))
    try:
        tensors: Dict[str, np.ndarray] = {}
        info = C["pfx_st_info"]()
        for i in range(lib.pfx_safetensors_count(f)):
            check(lib.pfx_safetensors_info(f, i, ctypes.byref(info)))
            name, shape = info.name.decode(), tuple(info.shape[:info.ndim])
            np_dtype = _ST_NUMPY[info.dtype]
            if np_dtype is None:
                a = np.empty(shape, dtype=np.float32)
                check(lib.pfx_safetensors_read_f32(f, info.name, ptr(a, ctypes.c_float), a.size))
            else:
                raw = ctypes.string_at(lib.pfx_safetensors_data(f, i), info.bytes)
                a = np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()
            tensors[name] = a
        meta = {}
        key, value = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(lib.pfx_safetensors_metadata_count(f)):
            check(lib.pfx_safetensors_metadata(f, i, ctypes.byref(key), ctypes.byref(value)))
            meta[(key.value or b"").decode()] = (value.value or b"").decode()
        return tensors, meta
    finally:
        lib.pfx_safetensors_close(ctypes.byref(f))


def write_safetensors(path: str, tensors: Mapping[str, Any],
                      metadata: Optional[Mapping[str, str]] = None, *,
                      dtype: str = "f32") -> None:
    """Writes float arrays (stored as dtype: f32, f16 or bf16) atomically."""
    items = (C["pfx_named_tensor"] * max(len(tensors), 1))()
    keep: List[Any] = []
    for i, (name, value) in enumerate(tensors.items()):
        a = float32_array(value, f"tensors[{name!r}]")
        if a.ndim > 4:
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"tensors[{name!r}]: at most 4 dimensions, got shape {a.shape}")
        keep += [a, text(name)]
        items[i].name, items[i].host, items[i].ndim = keep[-1], ptr(a, ctypes.c_float), a.ndim
        for d, s in enumerate(a.shape):
            items[i].shape[d] = s
        items[i].dtype = dtype_code(dtype, "dtype")
    metadata = dict(metadata or {})
    meta = (C["pfx_st_metadata"] * max(len(metadata), 1))()
    for i, (k, v) in enumerate(metadata.items()):
        keep += [text(k), text(v)]
        meta[i].key, meta[i].value = keep[-2], keep[-1]
    check(lib.pfx_safetensors_save(None, text(path), items, len(tensors), meta, len(metadata)))


@dataclass
class PeftConfig:
    """adapter_config.json of a PREFIX_TUNING adapter (pfx_peft_config)."""
    num_virtual_tokens: int
    num_layers: int
    token_dim: int
    num_attention_heads: int
    encoder_hidden_size: int
    prefix_projection: bool
    inference_mode: bool
    task_type: str
    base_model_name_or_path: str

    @classmethod
    def _from_c(cls, c: Any) -> "PeftConfig":
        kw = {f: getattr(c, f) for f in cls.__dataclass_fields__}
        kw["task_type"] = kw["task_type"].decode()
        kw["base_model_name_or_path"] = kw["base_model_name_or_path"].decode()
        return cls(**kw)


def read_peft_config(path: str) -> PeftConfig:
    """Reads and checks path/adapter_config.json."""
    c = C["pfx_peft_config"]()
    check(lib.pfx_peft_read_config(text(path), ctypes.byref(c)))
    return PeftConfig._from_c(c)


def load_peft(runtime: Runtime, path: str, *, kv_heads: int = 0) -> Prefix:
    """A PEFT prefix-tuning folder as a Prefix of float32 tensors [Hkv, P, D]
    per layer (kv_heads 0: the adapter's num_attention_heads)."""
    config = read_peft_config(path)
    L = config.num_layers
    T = ctypes.POINTER(C["pfx_tensor"])
    keys, values = (T * L)(), (T * L)()
    check(lib.pfx_peft_load_prefixes(runtime._live(), text(path), kv_heads, keys, values, L,
                                     None), runtime)
    return Prefix([Tensor._wrap(runtime, keys[i]) for i in range(L)],
                  [Tensor._wrap(runtime, values[i]) for i in range(L)])


def save_peft(runtime: Runtime, path: str, prefix: Prefix, *,
              base_model_name_or_path: Optional[str] = None, task_type: Optional[str] = None,
              num_attention_heads: int = 0) -> None:
    """Writes a Prefix's tensors as a PEFT prefix-tuning folder that
    PeftModel.from_pretrained reads."""
    if not prefix.keys:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT, "prefix: no prefix tensors to save")
    params = C["pfx_peft_save_params"]()
    lib.pfx_peft_default_save_params(ctypes.byref(params))
    keep = [text(task_type), text(base_model_name_or_path)]
    params.task_type, params.base_model_name_or_path = keep
    params.num_attention_heads = num_attention_heads
    L = len(prefix.keys)
    T = ctypes.POINTER(C["pfx_tensor"])
    k = (T * L)(*[t._live() for t in prefix.keys])
    v = (T * L)(*[t._live() for t in prefix.values])
    check(lib.pfx_peft_save_prefixes(runtime._live(), text(path), k, v, L,
                                     ctypes.byref(params)), runtime)


@dataclass
class Gains:
    """A gains file's content: gains [L, H] with a gain mode, dim_gains
    [L, H, D] when structured, and the ramp r training had reached."""
    gain_mode: str
    gains: Optional[np.ndarray]
    dim_gains: Optional[np.ndarray]
    gain_ramp: float = 1.0

    def prefix(self, *, gain_ramp: Optional[float] = None) -> Prefix:
        """A Prefix that attends with these gains (at ramp 1 unless given,
        as the adapter bank applies them)."""
        return Prefix(gains=self.gains, gain_mode=self.gain_mode, dim_gains=self.dim_gains,
                      gain_ramp=1.0 if gain_ramp is None else gain_ramp)


def read_gains(path: str, layers: int, heads: int, head_dim: int) -> Gains:
    """Reads a gains file (out_dir/gains.safetensors of tune or pretrain, or
    a folder holding one) for a model of that shape, checked by the library."""
    if os.path.isdir(path):
        path = os.path.join(path, "gains.safetensors")
    f = ctypes.POINTER(C["pfx_safetensors"])()
    check(lib.pfx_safetensors_open(text(path), ctypes.byref(f)))
    try:
        g = np.zeros((layers, heads), dtype=np.float32)
        dg = np.zeros((layers, heads, head_dim), dtype=np.float32)
        v = C["pfx_gains_values"](gains=ptr(g, ctypes.c_float), dim_gains=ptr(dg, ctypes.c_float))
        check(lib.pfx_gains_file_read(f, text(path), layers, heads, head_dim, ctypes.byref(v)))
    finally:
        lib.pfx_safetensors_close(ctypes.byref(f))
    mode = GAIN_MODE_NAMES[v.gain_mode]
    return Gains(mode, g if v.gain_mode else None, dg if v.structured else None,
                 float(v.gain_ramp))


def write_gains(path: str, gains: Gains) -> None:
    """Writes a gains file (io.h's format, what tune and pretrain write and
    the adapter bank reads)."""
    mode = GAIN_MODE_NAMES[gain_mode_code(gains.gain_mode)]
    tensors: Dict[str, Any] = {}
    if mode != "off":
        if gains.gains is None:
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, f"gains.gains: needed with gain_mode {mode}")
        tensors["gains"] = float32_array(gains.gains, "gains.gains", ndim=2)
    elif gains.gains is not None:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT, "gains.gains: given with gain_mode off")
    if gains.dim_gains is not None:
        tensors["dim_gains"] = float32_array(gains.dim_gains, "gains.dim_gains", ndim=3)
    write_safetensors(path, tensors, {
        "format": GAINS_FORMAT, "gain_mode": mode,
        "structured": "true" if gains.dim_gains is not None else "false",
        "gain_ramp": repr(float(gains.gain_ramp))})
