#!/usr/bin/env python3
"""--adapter DIR/adapter_model.safetensors (the weights file of a PEFT folder,
as a user may name it) stands for the folder in generate, eval and attn-map:
the same output as with the folder; a weights file without adapter_config.json
beside it fails with a message that says to pass the folder.

usage: test_adapter_path_cli.py PREFIXCL FIXTURE_DIR   (standard library only)
"""
import os
import shutil
import sys
import tempfile

from cli_run import run


def main():
    exe, fix = sys.argv[1], sys.argv[2]
    model = os.path.join(fix, "gpt2")
    folder = os.path.join(model, "adapter1")
    weights = os.path.join(folder, "adapter_model.safetensors")
    gen = ["generate", "--model", model, "--prompt", "the quick brown fox", "--max-new-tokens", "5"]
    by_folder, _ = run(exe, gen + ["--adapter", folder])
    by_file, _ = run(exe, gen + ["--adapter", weights])
    if by_file != by_folder:
        sys.exit("generate --adapter FILE %r != --adapter FOLDER %r" % (by_file, by_folder))

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "eval.txt")
        with open(data, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\nHello, world\n")
        ev = ["eval", "--model", model, "--data", data]
        by_folder, _ = run(exe, ev + ["--adapter", folder])
        by_file, _ = run(exe, ev + ["--adapter", weights])
        if by_file.replace(weights, folder) != by_folder:
            sys.exit("eval --adapter FILE %r != --adapter FOLDER %r" % (by_file, by_folder))

        maps = []
        for i, adapter in enumerate((folder, weights)):
            csv = os.path.join(tmp, "map%d.csv" % i)
            run(exe, ["attn-map", "--model", model, "--adapter", adapter, "--text", "Hello, world",
                      "--layer", "0", "--head", "1", "--out", os.path.join(tmp, "map%d.png" % i), "--csv", csv])
            with open(csv) as f:
                maps.append(f.read())
        if maps[0] != maps[1]:
            sys.exit("attn-map --adapter FILE differs from --adapter FOLDER")

        # the weights alone, without adapter_config.json: say to pass the folder
        lone = os.path.join(tmp, "lone")
        os.mkdir(lone)
        shutil.copy(weights, lone)
        _, err = run(exe, gen + ["--adapter", os.path.join(lone, "adapter_model.safetensors")], 1)
        if "adapter_config.json" not in err or "pass the PEFT folder" not in err:
            sys.exit("a lone weights file: %r" % err)
    print("ok")


if __name__ == "__main__":
    main()
