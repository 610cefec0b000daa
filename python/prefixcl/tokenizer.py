"""The tokenizer of a model folder (tokenizer.h): the ids Hugging Face's
`tokenizers` gives, with its defaults (special tokens added on encode,
skipped on decode)."""
from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Union

from ._core import C, Status, check, int32_array, lib, ptr, refuse, text
from . import _capi, _decls

_ADD_SPECIAL = _decls.MACROS["PFX_ENCODE_ADD_SPECIAL"]
_SKIP_SPECIAL = _decls.MACROS["PFX_DECODE_SKIP_SPECIAL"]
lib.pfx_tokenizer_id_to_token.restype = ctypes.c_void_p  # bytes of a known length


class Tokenizer:
    """A loaded tokenizer (pfx_tokenizer): path/tokenizer.json, or GPT-2's
    vocab.json + merges.txt. Read-only: encode and decode may run from
    several threads. Freed by close(), a with block or collection."""

    def __init__(self, path: str):
        handle = ctypes.POINTER(C["pfx_tokenizer"])()
        check(lib.pfx_tokenizer_load(text(path), ctypes.byref(handle)))
        self._handle = handle

    def _live(self) -> Any:
        if not getattr(self, "_handle", None):
            raise refuse(Status.PFX_ERROR_NULL_ARGUMENT, "tokenizer: closed")
        return self._handle

    def encode(self, text_: Union[str, bytes], add_special_tokens: bool = True) -> List[int]:
        """Token ids of a str (UTF-8) or bytes (any bytes)."""
        if not isinstance(text_, (str, bytes)):
            raise refuse(Status.PFX_ERROR_INVALID_ARGUMENT,
                         f"text: str or bytes expected, got {type(text_).__name__}")
        data = text_.encode() if isinstance(text_, str) else text_
        ids = ctypes.POINTER(ctypes.c_int32)()
        count = ctypes.c_size_t()
        check(lib.pfx_tokenizer_encode(self._live(), data, len(data),
                                       _ADD_SPECIAL if add_special_tokens else 0,
                                       ctypes.byref(ids), ctypes.byref(count)))
        try:
            return ids[:count.value]
        finally:
            _capi.free(ids)

    def count(self, text_: Union[str, bytes], add_special_tokens: bool = True) -> int:
        """The number of tokens encode gives."""
        return len(self.encode(text_, add_special_tokens))

    def decode_bytes(self, ids: Any, skip_special_tokens: bool = True) -> bytes:
        """The bytes the decoder gives (never a U+FFFD substitution)."""
        a = int32_array(ids, "ids", ndim=1)
        out = ctypes.c_char_p()
        n = ctypes.c_size_t()
        check(lib.pfx_tokenizer_decode(self._live(), ptr(a, ctypes.c_int32), a.size,
                                       _SKIP_SPECIAL if skip_special_tokens else 0,
                                       ctypes.byref(out), ctypes.byref(n)))
        address = ctypes.cast(out, ctypes.c_void_p).value or 0  # never NULL on success
        try:
            return ctypes.string_at(address, n.value)
        finally:
            _capi.free(address)

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        """The text of ids, invalid UTF-8 replaced by U+FFFD as HF does."""
        return self.decode_bytes(ids, skip_special_tokens).decode("utf-8", errors="replace")

    @property
    def vocab_size(self) -> int:
        """1 + the largest id (pfx_tokenizer_vocab_size)."""
        return lib.pfx_tokenizer_vocab_size(self._live())

    def token_to_id(self, token: str) -> Optional[int]:
        """The id of a token string, or None."""
        i = lib.pfx_tokenizer_token_to_id(self._live(), text(token))
        return None if i < 0 else i

    def id_to_token(self, id_: int) -> Optional[str]:
        """The token string of an id, or None."""
        n = ctypes.c_size_t()
        p = lib.pfx_tokenizer_id_to_token(self._live(), int(id_), ctypes.byref(n))
        return None if not p else ctypes.string_at(p, n.value).decode(errors="replace")

    def is_special(self, id_: int) -> bool:
        """Whether id is an added token marked special."""
        return bool(lib.pfx_tokenizer_is_special(self._live(), int(id_)))

    def _special(self, which: int) -> Optional[int]:
        i = lib.pfx_tokenizer_special_id(self._live(), which)
        return None if i < 0 else i

    @property
    def bos_id(self) -> Optional[int]:
        return self._special(0)

    @property
    def eos_id(self) -> Optional[int]:
        return self._special(1)

    @property
    def pad_id(self) -> Optional[int]:
        return self._special(2)

    @property
    def unk_id(self) -> Optional[int]:
        return self._special(3)

    def close(self) -> None:
        if getattr(self, "_handle", None):
            lib.pfx_tokenizer_free(ctypes.byref(self._handle))
            self._handle = None

    def __enter__(self) -> "Tokenizer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
