"""prefixcl from Python: prefix tuning and gain-scaled attention on any
OpenCL device, through libprefixcl's public C API (ctypes; see
python/README.md for why and how the library is found).

    import prefixcl
    with prefixcl.Runtime("cpu") as rt:
        model = prefixcl.load_model(rt, "tests/fixtures/models/gpt2")
        logits = model.forward([[1, 2, 3]])          # float32 [1, 3, V]
"""
from ._core import (Device, DeviceType, Error, Runtime, Status, Tensor, devices, select_device,
                    version)
from .files import (Gains, PeftConfig, load_peft, read_gains, read_peft_config, read_safetensors,
                    save_peft, write_gains, write_safetensors)
from .generate import AdapterBank, BankPrefix, Request, Scheduler, generate
from .jobs import (EvalProgress, EvalResult, PretrainResult, PretrainStep, TuneResult, TuneStep,
                   evaluate, pretrain, tune)
from .model import HeadStats, Model, ModelShape, Prefix, load_model, read_config
from .tokenizer import Tokenizer

__version__ = version()

__all__ = [
    "AdapterBank", "BankPrefix", "Request", "Scheduler", "generate",
    "Device", "DeviceType", "Error", "EvalProgress", "EvalResult", "PretrainResult",
    "PretrainStep", "TuneResult", "TuneStep", "evaluate", "pretrain", "tune", "Gains", "HeadStats", "Model", "ModelShape", "PeftConfig",
    "Prefix", "Runtime", "Status", "Tensor", "Tokenizer", "devices", "load_model", "load_peft",
    "read_config", "read_gains", "read_peft_config", "read_safetensors", "save_peft",
    "select_device", "version", "write_gains", "write_safetensors",
]
