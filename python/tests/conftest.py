"""Shared fixtures: the committed tiny models and tokenizers of
tests/fixtures, and one runtime for the session (the device $PREFIXCL_DEVICE
or the default one; kernel binaries from $PREFIXCL_CACHE_DIR)."""
from pathlib import Path

import pytest

import prefixcl

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
MODELS = FIXTURES / "models"


@pytest.fixture(scope="session")
def runtime():
    with prefixcl.Runtime() as rt:
        yield rt


@pytest.fixture(scope="session")
def gpt2(runtime):
    with prefixcl.load_model(runtime, str(MODELS / "gpt2")) as m:
        yield m


def expected(name):
    """The numbers transformers + PEFT computed (tests/fixtures/make_model_fixture.py)."""
    tensors, _ = prefixcl.read_safetensors(str(MODELS / name / "expected.safetensors"))
    return tensors


def valid_rel(ref, got, lens):
    """Relative L2 error over the valid positions, as tests/test_model_fixture.c measures."""
    num = den = 0.0
    for b, n in enumerate(lens):
        d = ref[b, :n].astype("f8") - got[b, :n]
        num += float((d * d).sum())
        den += float((ref[b, :n].astype("f8") ** 2).sum())
    return (num / den) ** 0.5
