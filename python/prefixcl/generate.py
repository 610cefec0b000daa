"""Generation (generate.h, scheduler.h): a bank of adapters held once on
the device, many adapters in one batch, and the scheduler's continuous
batching on its own worker thread."""
from __future__ import annotations

import ctypes
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._core import (C, Status, check, dtype_code, int32_array, lib, ptr, refuse, sigint_stops,
                    text)
from .model import Model, Prefix
from .tokenizer import Tokenizer

AdapterRef = Union[None, int, str]


class AdapterBank:
    """Up to `capacity` adapters of one prefix length for a model
    (pfx_adapter_bank): PEFT prefix-tuning folders, prefixcl prefixes files,
    or gains files (a bank holds prefix adapters or gains files, not both).
    Entries are numbered from 0 in the order added."""

    def __init__(self, model: Model, capacity: int):
        self._handle: Any = None
        self.paths: List[str] = []
        handle = ctypes.POINTER(C["pfx_adapter_bank"])()
        check(lib.pfx_adapter_bank_create(model._live(), int(capacity), ctypes.byref(handle)),
              model.runtime)
        self.model, self._handle = model, handle
        model.runtime._adopt(self)

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "bank: closed")
        return self._handle

    def add(self, path: str) -> int:
        """Adds the adapter at path; returns its entry."""
        entry = ctypes.c_int32()
        check(lib.pfx_adapter_bank_add(self._live(), text(path), ctypes.byref(entry)),
              self.model.runtime)
        self.paths.append(str(path))
        return entry.value

    def __len__(self) -> int:
        return lib.pfx_adapter_bank_count(self._live())

    @property
    def prefix_len(self) -> int:
        """P of the bank (0 while empty, or for gains files)."""
        return lib.pfx_adapter_bank_prefix_len(self._live())

    def prefix(self, entries: Any) -> "BankPrefix":
        """The bank as the prefix of a model call: entries[b] is item b's
        adapter (the gains of entries[0] apply to the whole call)."""
        return BankPrefix(self, int32_array(entries, "entries", ndim=1))

    def close(self) -> None:
        if getattr(self, "_handle", None):
            lib.pfx_adapter_bank_destroy(ctypes.byref(self._handle))
            self._handle = None

    def __enter__(self) -> "AdapterBank":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class BankPrefix(Prefix):
    """Prefixes chosen per item from a bank (pfx_adapter_bank_prefix)."""

    def __init__(self, bank: AdapterBank, entries: np.ndarray):
        super().__init__()
        self.bank, self.entries = bank, entries

    @property
    def prefix_len(self) -> int:
        return self.bank.prefix_len

    def _c(self, shape: Any, batch: int) -> Tuple[Any, list]:
        if self.entries.shape != (batch,):
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                         f"entries: shape ({batch},) expected, got {self.entries.shape}")
        p = C["pfx_model_prefix"]()
        check(lib.pfx_adapter_bank_prefix(self.bank._live(), ptr(self.entries, ctypes.c_int32),
                                          batch, ctypes.byref(p)), self.bank.model.runtime)
        return p, [self.entries]

    def close(self) -> None:
        pass  # the bank owns the tensors


def _sampling(max_new_tokens: int, temperature: float, top_k: int, top_p: float,
              stop: Optional[Sequence[int]]) -> Tuple[Any, Any]:
    if int(max_new_tokens) < 1:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT, "max_new_tokens: at least 1")
    stops = int32_array(list(stop or []), "stop", ndim=1)
    s = C["pfx_sampling"](temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                          max_new_tokens=int(max_new_tokens), stop=ptr(stops, ctypes.c_int32),
                          stop_count=stops.size)
    return s, stops


def _bank_for(model: Model, adapters: Sequence[AdapterRef],
              bank: Optional[AdapterBank]) -> Tuple[Optional[AdapterBank], List[int], bool]:
    """The bank and each request's entry (-1: none); True when the bank is the call's own."""
    paths = sorted({str(a) for a in adapters if isinstance(a, str) or hasattr(a, "__fspath__")})
    if paths and bank is not None:
        raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                     "adapters: paths and a bank together (add the paths to the bank)")
    own = bool(paths)
    if own:
        bank = AdapterBank(model, len(paths))
        try:
            index = {p: bank.add(p) for p in paths}
        except BaseException:
            bank.close()
            raise
    entries = []
    for i, a in enumerate(adapters):
        if a is None:
            entries.append(-1)
        elif isinstance(a, (int, np.integer)):
            if bank is None and a >= 0:
                raise refuse(Status.PFX_ERROR_NULL_ARGUMENT,
                             f"adapters[{i}]: an entry without a bank")
            entries.append(int(a))
        else:
            entries.append(index[str(a)])
    return bank, entries, own


def generate(model: Model, prompts: Sequence[Any], *,
             adapters: Optional[Sequence[AdapterRef]] = None,
             bank: Optional[AdapterBank] = None, tokenizer: Optional[Tokenizer] = None,
             max_new_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 0.0, stop: Optional[Sequence[int]] = None,
             seed: Union[int, Sequence[int]] = 0,
             on_token: Optional[Callable[[int, int], Any]] = None,
             kv_dtype: str = "f32") -> List[Any]:
    """Generates for every prompt as one batch (pfx_generate): one prefill,
    then decode steps until each has max_new_tokens or a stop token (kept).

    prompts: token id lists, or strings with `tokenizer` (then the results
    are strings too). adapters[i]: None (the bare model), a path (PEFT
    folder, prefixes or gains file; the call builds a bank of the distinct
    paths) or an entry of `bank`. temperature 0 is greedy; seed is one seed
    or one a prompt. on_token(i, token) sees every new token. The tokens of a
    prompt do not depend on the others in the batch. kv_dtype: the KV
    cache's storage, "f32", "f16" or "bf16" (pfx_kv_cache_create_dtype)."""
    count = len(prompts)
    if count == 0:
        return []
    if tokenizer is not None:
        prompts = [tokenizer.encode(p) if isinstance(p, (str, bytes)) else p for p in prompts]
    ids = [int32_array(p, f"prompts[{i}]", ndim=1) for i, p in enumerate(prompts)]
    for i, a in enumerate(ids):
        if a.size == 0:
            raise refuse(Status.PFX_ERROR_INVALID_SHAPE, f"prompts[{i}]: empty")
    adapters = list(adapters) if adapters is not None else [None] * count
    if len(adapters) != count:
        raise refuse(Status.PFX_ERROR_INVALID_SHAPE,
                     f"adapters: {len(adapters)} entries for {count} prompts")
    seeds = [int(seed)] * count if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
    if len(seeds) != count:
        raise refuse(Status.PFX_ERROR_INVALID_SHAPE, f"seed: {len(seeds)} seeds for {count} prompts")
    sampling, stops = _sampling(max_new_tokens, temperature, top_k, top_p, stop)
    bank, entries, own_bank = _bank_for(model, adapters, bank)
    try:
        P = bank.prefix_len if bank is not None else 0
        longest = max(a.size for a in ids)
        max_len = min(longest + int(max_new_tokens), model.shape.max_positions - P)
        ctx = model._context(count, longest, P)
        cache = ctypes.POINTER(C["pfx_kv_cache"])()
        check(lib.pfx_kv_cache_create_dtype(model._live(), count, max(max_len, 1),
                                            dtype_code(kv_dtype, "kv_dtype"), ctypes.byref(cache)),
              model.runtime)
        try:
            outs = [np.zeros(int(max_new_tokens), dtype=np.int32) for _ in range(count)]
            requests = (C["pfx_request"] * count)()
            for i in range(count):
                r = requests[i]
                r.prompt, r.prompt_len = ptr(ids[i], ctypes.c_int32), ids[i].size
                r.adapter, r.seed, r.out = entries[i], seeds[i], ptr(outs[i], ctypes.c_int32)
            errors: List[BaseException] = []

            def called(user: Any, request: int, token: int) -> None:
                try:
                    if on_token is not None:
                        on_token(request, token)
                except BaseException as e:
                    errors.append(e)

            callback = C["pfx_token_fn"](called)
            with sigint_stops(None) as sigint:  # no stop flag: raised after the batch
                status = lib.pfx_generate(ctx, cache, bank._live() if bank is not None else None,
                                          requests, count, ctypes.byref(sampling), callback,
                                          None, None)
            if errors:
                raise errors[0]
            if sigint["hit"]:
                raise KeyboardInterrupt
            check(status, model.runtime)
            results = [outs[i][:requests[i].out_len].tolist() for i in range(count)]
        finally:
            lib.pfx_kv_cache_destroy(ctypes.byref(cache))
    finally:
        if own_bank and bank is not None:
            bank.close()
    if tokenizer is not None:
        return [tokenizer.decode(r) for r in results]
    return results


FINISH = {0: "length", 1: "stop", 2: "cancelled", 3: "error"}


@dataclass
class Request:
    """A request of a Scheduler: its tokens so far, and once done, how it
    ended ("length", "stop", "cancelled", "error") and the error's text."""
    id: int
    tokens: List[int] = field(default_factory=list)
    finish: Optional[str] = None
    error: Optional[str] = None
    on_token: Optional[Callable[[int], Any]] = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait(self, timeout: Optional[float] = None) -> List[int]:
        """Waits for the end; returns the tokens (TimeoutError past timeout)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.id}: not done after {timeout} s")
        return self.tokens

    @property
    def done(self) -> bool:
        return self._done.is_set()


class Scheduler:
    """Continuous batching in process (pfx_scheduler): requests submitted
    from any thread join the running batch at the next step, each with its
    adapter of the bank; tokens come from the scheduler's worker thread.
    The model (and bank) belong to the scheduler until close(). kv_dtype:
    the KV cache's storage, "f32", "f16" or "bf16"."""

    def __init__(self, model: Model, bank: Optional[AdapterBank] = None, *, slots: int = 4,
                 max_len: int = 256, queue: int = 64, kv_dtype: str = "f32"):
        self._handle: Any = None
        self.model, self.bank = model, bank
        self._requests: Dict[int, Request] = {}
        self._keys = itertools.count(1)
        self._lock = threading.Lock()
        # One pair of C callbacks for the scheduler's life; `user` is the request's key.
        self._on_token = C["pfx_sched_token_fn"](self._token)
        self._on_done = C["pfx_sched_done_fn"](self._finished)
        params = C["pfx_scheduler_params"](slots=int(slots), max_len=int(max_len),
                                           queue=int(queue),
                                           kv_dtype=dtype_code(kv_dtype, "kv_dtype"))
        handle = ctypes.POINTER(C["pfx_scheduler"])()
        check(lib.pfx_scheduler_create(model._live(), bank._live() if bank else None,
                                       ctypes.byref(params), ctypes.byref(handle)), model.runtime)
        self._handle = handle
        model.runtime._adopt(self)

    def _token(self, user: Any, token: int) -> bool:
        with self._lock:
            r = self._requests.get(user)
        if r is None:
            return False
        r.tokens.append(token)
        try:
            return r.on_token is None or r.on_token(token) is not False
        except BaseException as e:
            r.error = f"on_token raised {e!r}"
            return False

    def _finished(self, user: Any, finish: int, error: Optional[bytes]) -> None:
        with self._lock:
            r = self._requests.pop(user, None)
        if r is not None:
            r.finish = FINISH.get(finish, str(finish))
            if error:
                r.error = error.decode(errors="replace")
            r._done.set()

    def submit(self, prompt: Any, *, adapter: int = -1, max_new_tokens: int = 32,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0,
               stop: Optional[Sequence[int]] = None, seed: int = 0,
               on_token: Optional[Callable[[int], Any]] = None) -> Request:
        """Queues a prompt (token ids); on_token(token) returning False ends
        it there. A full queue raises Error PFX_ERROR_BUSY."""
        ids = int32_array(prompt, "prompt", ndim=1)
        sampling, stops = _sampling(max_new_tokens, temperature, top_k, top_p, stop)
        key = next(self._keys)
        request = Request(0, on_token=on_token)
        c = C["pfx_sched_request"](prompt=ptr(ids, ctypes.c_int32), prompt_len=ids.size,
                                   adapter=int(adapter), sampling=sampling, seed=int(seed),
                                   on_token=self._on_token, on_done=self._on_done, user=key)
        with self._lock:
            self._requests[key] = request
        rid = ctypes.c_uint64()
        status = lib.pfx_scheduler_submit(self._live(), ctypes.byref(c), ctypes.byref(rid))
        if status != 0:
            with self._lock:
                self._requests.pop(key, None)
            check(status, self.model.runtime)
        request.id = rid.value
        return request

    def cancel(self, request: Request) -> None:
        """Ends a request at the worker's next step ("cancelled")."""
        check(lib.pfx_scheduler_cancel(self._live(), request.id), self.model.runtime)

    def stats(self) -> dict:
        """queued, running, slots, prefill and decode steps and tokens, ..."""
        s = C["pfx_scheduler_stats"]()
        check(lib.pfx_scheduler_get_stats(self._live(), ctypes.byref(s)), self.model.runtime)
        return {name: getattr(s, name) for name, _ in s._fields_}

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "scheduler: closed")
        return self._handle

    def close(self) -> None:
        """Cancels what is queued or running, stops the worker, frees the
        scheduler (idempotent)."""
        if getattr(self, "_handle", None):
            lib.pfx_scheduler_destroy(ctypes.byref(self._handle))
            self._handle = None

    def __enter__(self) -> "Scheduler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
