"""Errors, enums, argument checks and the runtime: what every module uses."""
from __future__ import annotations

import contextlib
import ctypes
import enum
import signal
import threading
import weakref
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, cast

import numpy as np

from . import _capi, _decls

C = _capi.TYPES
lib = _capi.lib

# Built from _decls.py (checked against common.h), so typed Any for checkers.
Status: Any = cast(Any, enum.IntEnum)("Status", dict(_decls.ENUMS["pfx_status"]))
Status.__doc__ = "pfx_status: 0 is success, negative values are errors."


class Error(Exception):
    """Any failure of the library, or an argument refused before a call.

    ``status`` is the pfx_status (a :class:`Status`), ``name`` its C name
    ("PFX_ERROR_INVALID_SHAPE"), ``message`` the library's detail
    (pfx_last_error) or, for an argument refused here, one naming it."""

    def __init__(self, status: int, message: str):
        try:
            self.status: Any = Status(status)
        except ValueError:  # a status newer than this binding
            self.status = int(status)
        self.name = _capi.lib.pfx_status_string(int(status)).decode()
        self.message = message
        super().__init__(f"{self.name}: {message}" if message else self.name)


def check(status: int, runtime: Optional["Runtime"] = None) -> None:
    """Raises Error for a failed status, with pfx_last_error of the runtime
    (or of this thread's calls without one)."""
    if status != 0:
        handle = runtime._handle if runtime is not None else None
        raise Error(status, lib.pfx_last_error(handle).decode(errors="replace"))


def refuse(status: int, message: str) -> Error:
    return Error(status, message)


@contextlib.contextmanager
def sigint_stops(flag: Optional[Any]) -> Any:
    """While a long call runs: Ctrl-C sets `flag` (a ctypes int the call
    reads as its stop flag, or None) instead of raising KeyboardInterrupt in
    the middle of a callback, where ctypes would print and drop it. Yields a
    dict whose "hit" says whether it came; the caller raises
    KeyboardInterrupt after the call. Only in the main thread, and only over
    Python's own SIGINT handler."""
    state = {"hit": False}
    if (threading.current_thread() is not threading.main_thread() or
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield state
        return

    def handler(signum: int, frame: Any) -> None:
        state["hit"] = True
        if flag is not None:
            flag.value = 1
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


def version() -> str:
    """pfx_version(): the library's "MAJOR.MINOR.PATCH"."""
    return lib.pfx_version().decode()


_DTYPES = {"f32": 0, "float32": 0, "f16": 1, "half": 1, "float16": 1, "bf16": 2,
           "bfloat16": 2, "q8_0": 3}
_GAIN_MODES = {"off": 0, "linear": 1, "tanh": 2}
GAIN_MODE_NAMES = {v: k for k, v in _GAIN_MODES.items()}


def dtype_code(storage: str, name: str = "storage") -> int:
    """pfx_dtype of "f32", "f16", "bf16" or "q8_0"."""
    try:
        return _DTYPES[str(storage).lower()]
    except KeyError:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                     f"{name}: {storage!r} is not one of f32, f16, bf16, q8_0") from None


def gain_mode_code(mode: Optional[str], name: str = "gain_mode") -> int:
    """pfx_gain_mode of None/"off", "linear" or "tanh"."""
    try:
        return _GAIN_MODES[str(mode or "off").lower()]
    except KeyError:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                     f"{name}: {mode!r} is not one of off, linear, tanh") from None


def int32_array(x: Any, name: str, ndim: Optional[int] = None,
                shape: Optional[Sequence[Optional[int]]] = None) -> np.ndarray:
    """x as a C-ordered int32 array: integers only (any integer dtype whose
    values fit int32, or a nested list of ints); else Error naming `name`."""
    a = np.asarray(x)
    if a.size == 0 and a.dtype == np.float64:
        a = a.astype(np.int32)
    if not np.issubdtype(a.dtype, np.integer):
        raise refuse(Status.PFX_ERROR_DTYPE_MISMATCH,
                     f"{name}: integers expected, got dtype {a.dtype}")
    if a.dtype != np.int32:
        if a.size and (a.min() < -2**31 or a.max() >= 2**31):
            raise refuse(Status.PFX_ERROR_OUT_OF_RANGE, f"{name}: values beyond int32")
        a = a.astype(np.int32)
    _check_shape(a, name, ndim, shape)
    return np.ascontiguousarray(a)


def float32_array(x: Any, name: str, ndim: Optional[int] = None,
                  shape: Optional[Sequence[Optional[int]]] = None) -> np.ndarray:
    """x as a C-ordered float32 array: float32 or float64 arrays or nested
    lists of numbers; else Error naming `name`."""
    a = np.asarray(x)
    if a.dtype.kind in "iu" and not isinstance(x, np.ndarray):
        a = a.astype(np.float32)
    if a.dtype not in (np.float32, np.float64):
        raise refuse(Status.PFX_ERROR_DTYPE_MISMATCH,
                     f"{name}: float32 expected, got dtype {a.dtype}")
    _check_shape(a, name, ndim, shape)
    return np.ascontiguousarray(a, dtype=np.float32)


def _check_shape(a: np.ndarray, name: str, ndim: Optional[int],
                 shape: Optional[Sequence[Optional[int]]]) -> None:
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and a.ndim != ndim:
        raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                     f"{name}: {ndim} dimensions expected, got shape {a.shape}")
    if shape is not None:
        for want, got in zip(shape, a.shape):
            if want is not None and want != got:
                want_text = tuple("*" if s is None else s for s in shape)
                raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                             f"{name}: shape {want_text} expected, got {a.shape}")


def ptr(a: Optional[np.ndarray], ctype: Any) -> Any:
    """A ctypes pointer to a's data (None for None)."""
    return None if a is None else a.ctypes.data_as(ctypes.POINTER(ctype))


def text(s: Any) -> Optional[bytes]:
    """A path or string as the bytes C takes (None stays None)."""
    if s is None:
        return None
    if isinstance(s, bytes):
        return s
    return str(s).encode()


class DeviceType(enum.IntEnum):
    CPU = 1
    GPU = 2
    ACCELERATOR = 3
    OTHER = 4


@dataclass(frozen=True)
class Device:
    """One OpenCL device (pfx_device_info)."""
    platform_index: int
    device_index: int
    platform_name: str
    device_name: str
    vendor: str
    driver_version: str
    device_version: str
    opencl_c_version: str
    type: DeviceType
    unified_memory: bool
    compute_units: int
    clock_mhz: int
    global_mem_bytes: int
    max_alloc_bytes: int
    local_mem_bytes: int
    max_work_group_size: int
    has_fp16: bool
    has_fp64: bool

    @property
    def selector(self) -> str:
        """The "P:D" selector that names this device."""
        return f"{self.platform_index}:{self.device_index}"

    @classmethod
    def _from_c(cls, info: Any) -> "Device":
        kw: dict = {}
        for field in cls.__dataclass_fields__:
            v = getattr(info, field)
            kw[field] = v.decode(errors="replace") if isinstance(v, bytes) else v
        kw["type"] = DeviceType(kw["type"])
        return cls(**kw)


def devices() -> List[Device]:
    """Every OpenCL device, platform order then device order (pfx_device_list)."""
    count = ctypes.c_size_t()
    check(lib.pfx_device_count(ctypes.byref(count)))
    infos = (C["pfx_device_info"] * max(count.value, 1))()
    check(lib.pfx_device_list(infos, count.value, ctypes.byref(count)))
    return [Device._from_c(infos[i]) for i in range(count.value)]


def select_device(selector: Optional[str] = None) -> Device:
    """The device a selector names, as `--device` reads it: None or "" for
    $PREFIXCL_DEVICE or the default policy, "P:D", "gpu", "cpu",
    "accelerator", or a substring of the platform, vendor or device name."""
    info = C["pfx_device_info"]()
    check(lib.pfx_device_select(text(selector), ctypes.byref(info)))
    return Device._from_c(info)


class Runtime:
    """A runtime on one device (pfx_runtime): the context, queue and kernel
    cache that models and tensors live in. Use it as a context manager, or
    call close(); the handle is also freed at collection. Everything made
    from a runtime must be closed before it (a Model keeps its runtime
    alive)."""

    def __init__(self, device: Optional[str] = None, *, cache_dir: Optional[str] = None,
                 disable_cache: bool = False, gemm: str = "auto",
                 allow_overcommit: bool = False):
        params = C["pfx_runtime_params"]()
        lib.pfx_runtime_default_params(ctypes.byref(params))
        self._keep = [text(device), text(cache_dir)]
        params.device, params.cache_dir = self._keep
        params.disable_cache = disable_cache
        params.allow_overcommit = allow_overcommit
        gemms = {"auto": 0, "clblast": 1, "host": 2}
        if gemm not in gemms:
            raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                         f"gemm: {gemm!r} is not one of auto, clblast, host")
        params.gemm = gemms[gemm]
        handle = ctypes.POINTER(C["pfx_runtime"])()
        check(lib.pfx_runtime_create(ctypes.byref(handle), ctypes.byref(params)))
        self._handle = handle
        self._children: List[Any] = []

    def _adopt(self, child: Any) -> None:
        """Remembers an object holding handles of this runtime: close() closes it first."""
        self._children = [r for r in self._children if r() is not None]
        self._children.append(weakref.ref(child))

    def __repr__(self) -> str:
        if not getattr(self, "_handle", None):
            return "<prefixcl.Runtime closed>"
        return f"<prefixcl.Runtime on {self.device.selector} {self.device.device_name!r}>"

    @property
    def device(self) -> Device:
        """The device this runtime runs on."""
        return Device._from_c(lib.pfx_runtime_device(self._live()).contents)

    @property
    def gemm_backend(self) -> str:
        """"clblast" or "host": where dense products run."""
        return lib.pfx_gemm_backend_name(lib.pfx_runtime_gemm_backend(self._live())).decode()

    @property
    def cache_dir(self) -> str:
        """The kernel cache folder ("" when disabled)."""
        return lib.pfx_runtime_cache_dir(self._live()).decode()

    def memory(self) -> dict:
        """Device bytes held: live_bytes, peak_bytes, live_buffers, workspace_bytes."""
        s = C["pfx_memory_stats"]()
        check(lib.pfx_runtime_memory(self._live(), ctypes.byref(s)), self)
        return {name: getattr(s, name) for name, _ in s._fields_}

    def finish(self) -> None:
        """Waits for everything enqueued."""
        check(lib.pfx_runtime_finish(self._live()), self)

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "runtime: closed")
        return self._handle

    def close(self) -> None:
        """Releases the runtime, closing first what was made from it (idempotent)."""
        if getattr(self, "_handle", None):
            for ref in reversed(self._children):
                child = ref()
                if child is not None:
                    child.close()
            lib.pfx_runtime_destroy(ctypes.byref(self._handle))
            self._handle = None

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Tensor:
    """A device tensor (pfx_tensor), float32 on the host side whatever its
    storage. Owned tensors are freed by close(), a with block or collection."""

    def __init__(self, runtime: Runtime, shape: Sequence[int], dtype: str = "f32"):
        shape = tuple(int(s) for s in shape)
        if not 1 <= len(shape) <= 4 or min(shape) < 1:
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"shape: 1 to 4 dimensions of at least 1 expected, got {shape}")
        self.runtime = runtime
        dims = (ctypes.c_size_t * len(shape))(*shape)
        handle = ctypes.POINTER(C["pfx_tensor"])()
        check(lib.pfx_tensor_create(runtime._live(), dtype_code(dtype, "dtype"), len(shape), dims,
                                    ctypes.byref(handle)), runtime)
        self._handle = handle
        self._owned = True
        runtime._adopt(self)

    @classmethod
    def _wrap(cls, runtime: Runtime, handle: Any, owned: bool = True) -> "Tensor":
        t = cls.__new__(cls)
        t.runtime, t._handle, t._owned = runtime, handle, owned
        if owned:
            runtime._adopt(t)
        return t

    @classmethod
    def from_numpy(cls, runtime: Runtime, array: Any, dtype: str = "f32") -> "Tensor":
        """A new tensor holding `array` (float32, rounded to dtype)."""
        a = float32_array(array, "array")
        t = cls(runtime, a.shape, dtype)
        t.write(a)
        return t

    @property
    def shape(self) -> tuple:
        h = self._live()
        return tuple(lib.pfx_tensor_dim(h, i) for i in range(lib.pfx_tensor_ndim(h)))

    def numpy(self) -> np.ndarray:
        """The values as a new float32 C-ordered array of this shape."""
        out = np.empty(self.shape, dtype=np.float32)
        check(lib.pfx_tensor_read(self._live(), 0, out.size, ptr(out, ctypes.c_float)),
              self.runtime)
        return out

    def write(self, array: Any) -> None:
        """Copies `array` (this tensor's shape) in."""
        a = float32_array(array, "array", shape=self.shape)
        check(lib.pfx_tensor_write(self._live(), 0, a.size, ptr(a, ctypes.c_float)),
              self.runtime)

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "tensor: closed")
        return self._handle

    def close(self) -> None:
        if getattr(self, "_handle", None) and self._owned:
            lib.pfx_tensor_destroy(ctypes.byref(self._handle))
        self._handle = None

    def __enter__(self) -> "Tensor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
