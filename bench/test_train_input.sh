#!/bin/sh
# bench_train's bad --model and --data fail before any device work with a
# message that names the problem; bench/peer_train_llmc.py and
# bench/peer_train_torch.py show --help on the standard library, and the
# former refuses its bad options before making anything.
# Usage: test_train_input.sh PATH/TO/bench_train PATH/TO/peer_train_llmc.py
set -u
exe=${1:?usage: test_train_input.sh PATH/TO/bench_train PATH/TO/peer_train_llmc.py}
peer=${2:?usage: test_train_input.sh PATH/TO/bench_train PATH/TO/peer_train_llmc.py}
# shellcheck source=bench/expect_input.sh
. "$(dirname "$0")/expect_input.sh"

# expect NAME PATTERN ARGS...: `bench_train ARGS...` fails that way
expect() {
    name=$1 pattern=$2
    shift 2
    expect_failure "$name" "$pattern" "$exe" "$@"
}

# shard HEADER_INTS TOKENS FILE: an llm.c shard of that header (magic,
# version, count) and that many uint16 tokens of value 1
shard() {
    python3 -S -c 'import struct, sys
h = [int(x) for x in sys.argv[1].split(",")] + [0] * 253
with open(sys.argv[3], "wb") as f:
    f.write(struct.pack("<256i", *h[:256]) + struct.pack("<H", 1) * int(sys.argv[2]))' "$@"
}
shard 20240520,1,64 64 "$dir/short.bin"
shard 20240521,1,600 600 "$dir/magic.bin"
shard 20240520,1,600 599 "$dir/truncated.bin"

expect "unknown option" "--model DIR" --bogus
expect "--model without config.json" "$dir/missing" --model "$dir/missing"
expect "--data matching nothing" "$dir/none_\*.bin" --data "$dir/none_*.bin"
expect "--data of a wrong magic" "magic.bin" --data "$dir/magic.bin"
expect "--data truncated" "truncated.bin" --data "$dir/truncated.bin"
expect "--data short of the batch" "the batch needs 8" --data "$dir/short.bin" --tokens 16

for script in "$peer" "$(dirname "$peer")/peer_train_torch.py"; do
    if python3 -S "$script" --help >"$dir/stdout" 2>"$dir/stderr" && grep -q -- "--threads" "$dir/stdout"; then
        echo "ok   $(basename "$script") --help without site packages"
    else
        echo "FAIL $(basename "$script") --help without site packages:"
        sed 's/^/    /' "$dir/stderr" "$dir/stdout"
        failures=$((failures + 1))
    fi
done

# peer_train_llmc.py refuses before making weights, tokens or builds
peer_refuses() {
    name=$1 pattern=$2
    shift 2
    rm -rf "$dir/work"
    if python3 -S "$peer" --work "$dir/work" "$@" >"$dir/stdout" 2>&1; then
        echo "FAIL peer_train_llmc.py $name: ran"
        failures=$((failures + 1))
    elif ! grep -q -F -- "$pattern" "$dir/stdout"; then
        echo "FAIL peer_train_llmc.py $name, expected '$pattern':"
        sed 's/^/    /' "$dir/stdout"
        failures=$((failures + 1))
    elif [ -e "$dir/work" ]; then
        echo "FAIL peer_train_llmc.py $name: made $dir/work"
        failures=$((failures + 1))
    else
        echo "ok   peer_train_llmc.py $name"
    fi
}
peer_refuses "without --llmc-src" "--llmc-src" --peers llmc
peer_refuses "--peers of another" "--peers" --peers prefixcl,tf
peer_refuses "--tokens past the positions" "--tokens from 2 to 64" --shape small --tokens 128 \
    --peers torch

echo "$((11 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
