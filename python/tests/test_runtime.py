"""Version, devices and runtimes."""
import re
from pathlib import Path

import pytest

import prefixcl


def test_version_is_the_library_and_the_project():
    meson = (Path(__file__).resolve().parents[2] / "meson.build").read_text()
    assert prefixcl.__version__ == prefixcl.version()
    assert prefixcl.version() == re.search(r"version : '([^']+)'", meson).group(1)


def test_devices_and_selectors():
    devs = prefixcl.devices()
    assert devs
    first = devs[0]
    assert prefixcl.select_device(first.selector) == first
    assert prefixcl.select_device(first.device_name.split()[0].lower()).device_name
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.select_device("no-such-device-anywhere")
    assert e.value.name == "PFX_ERROR_DEVICE_NOT_FOUND"
    assert e.value.status == prefixcl.Status.PFX_ERROR_DEVICE_NOT_FOUND
    assert "no-such-device-anywhere" in e.value.message


def test_runtime(runtime):
    assert runtime.device in prefixcl.devices()
    with prefixcl.Runtime(runtime.device.selector, disable_cache=True) as other:
        assert other.device == runtime.device and other.cache_dir == ""
    assert runtime.gemm_backend in ("clblast", "host")
    m = runtime.memory()
    assert m["live_bytes"] <= m["peak_bytes"]


def test_tensor_round_trip_and_close(runtime):
    import numpy as np
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with prefixcl.Tensor.from_numpy(runtime, a) as t:
        assert t.shape == (2, 3, 4)
        got = t.numpy()
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, a)
        with pytest.raises(prefixcl.Error) as e:
            t.write(a.reshape(6, 4))
        assert e.value.name == "PFX_ERROR_INVALID_SHAPE" and "array" in e.value.message
    with pytest.raises(prefixcl.Error, match="closed"):
        t.numpy()


def test_runtime_close_closes_what_it_made():
    with prefixcl.Runtime() as rt:
        t = prefixcl.Tensor(rt, (4,))
    assert t._handle is None
    with pytest.raises(prefixcl.Error, match="runtime: closed"):
        rt.memory()


def test_bad_options_refused():
    with pytest.raises(prefixcl.Error) as e:
        prefixcl.Runtime(gemm="fast")
    assert e.value.name == "PFX_ERROR_INVALID_ARGUMENT" and "gemm" in e.value.message


def test_collection_frees_handles(runtime):
    import gc
    before = runtime.memory()["live_bytes"]
    t = prefixcl.Tensor(runtime, (1024, 256))
    assert runtime.memory()["live_bytes"] >= before + 1024 * 256 * 4
    del t
    gc.collect()
    assert runtime.memory()["live_bytes"] == before


def test_long_calls_release_the_gil():
    # Another Python thread keeps counting at its pace while the library
    # encodes a long text (with the GIL held it would count for at most a
    # switch interval, 5 ms, of the call's hundreds).
    import threading
    import time
    from conftest import FIXTURES
    with prefixcl.Tokenizer(str(FIXTURES / "tokenizers" / "gpt2")) as tok:
        text = ("The quick brown fox jumps over the lazy dog. " * 40000).encode()
        counts, stop = [0], threading.Event()

        def count():
            while not stop.is_set():
                counts[0] += 1
        worker = threading.Thread(target=count)
        worker.start()
        try:
            start, t0 = counts[0], time.perf_counter()
            time.sleep(0.1)
            rate = (counts[0] - start) / (time.perf_counter() - t0)
            before, t0 = counts[0], time.perf_counter()
            ids = tok.encode(text)
            seconds, during = time.perf_counter() - t0, counts[0] - before
        finally:
            stop.set()
            worker.join()
        assert len(ids) > 100000 and seconds > 0.05
        assert during > 0.25 * rate * seconds
