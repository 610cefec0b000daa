"""Tokenizers give the ids Hugging Face tokenizers gives: every case of the
committed fixtures (tests/fixtures/make_tokenizer_fixture.py), as
tests/test_tokenizer.c checks them."""
import json

import pytest

import prefixcl

from conftest import FIXTURES

DIRS = sorted(p.parent for p in (FIXTURES / "tokenizers").glob("*/cases.jsonl"))


@pytest.mark.parametrize("folder", DIRS, ids=[d.name for d in DIRS])
def test_cases(folder):
    with prefixcl.Tokenizer(str(folder)) as tok:
        cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
        assert len(cases) >= 300
        for c in cases:
            data = c["text"].encode("utf-8", "surrogatepass")
            assert tok.encode(data, add_special_tokens=False) == c["ids"], c["text"]
            ids = tok.encode(data)
            assert ids == c["ids_special"], c["text"]
            assert tok.count(data) == len(ids)
            assert tok.decode_bytes(ids, skip_special_tokens=False) == c["decoded"].encode(
                "utf-8", "surrogatepass"), c["text"]


def test_vocabulary():
    with prefixcl.Tokenizer(str(FIXTURES / "tokenizers" / "llama3")) as tok:
        assert tok.bos_id == 1362
        assert tok.is_special(1362)
        assert tok.id_to_token(1362) == "<|begin_of_text|>"
        assert tok.token_to_id("<|begin_of_text|>") == 1362
        assert tok.token_to_id("no such token at all") is None
        assert tok.vocab_size > 1362
        ids = tok.encode("Hello world")
        assert tok.decode(ids) == "Hello world"
        assert tok.decode(ids, skip_special_tokens=False).startswith("<|begin_of_text|>")


def test_refusals():
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.Tokenizer(str(FIXTURES / "no-such-folder"))
    assert e.value.name == "PFX_ERROR_IO"
    with prefixcl.Tokenizer(str(FIXTURES / "tokenizers" / "gpt2")) as tok:
        with pytest.raises(prefixcl.Error) as e:
            tok.decode([10**6])
        assert e.value.name == "PFX_ERROR_OUT_OF_RANGE"
        with pytest.raises(prefixcl.Error) as e:
            tok.decode([1.5])
        assert e.value.name == "PFX_ERROR_DTYPE_MISMATCH" and "ids" in e.value.message
        with pytest.raises(prefixcl.Error) as e:
            tok.encode(42)
        assert "text" in e.value.message
