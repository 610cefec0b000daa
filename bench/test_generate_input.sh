#!/bin/sh
# bench_generate's bad input fails before any device work with a message that
# names the problem; bench/peer_llama.py shows --help on the standard library.
# Usage: test_generate_input.sh PATH/TO/bench_generate PATH/TO/peer_llama.py
set -u
exe=${1:?usage: test_generate_input.sh PATH/TO/bench_generate PATH/TO/peer_llama.py}
peer=${2:?usage: test_generate_input.sh PATH/TO/bench_generate PATH/TO/peer_llama.py}
# shellcheck source=bench/expect_input.sh
. "$(dirname "$0")/expect_input.sh"

# expect NAME PATTERN ARGS...: `bench_generate ARGS...` fails that way
expect() {
    name=$1 pattern=$2
    shift 2
    expect_failure "$name" "$pattern" "$exe" "$@"
}

mkdir "$dir/two-layers"
cat >"$dir/two-layers/config.json" <<'JSON'
{"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 768, "n_head": 12,
 "n_inner": null, "n_layer": 2, "n_positions": 1024, "vocab_size": 50257,
 "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true}
JSON

expect "unknown option" "--model DIR" --bogus
expect "--model without config.json" "$dir/missing/config.json" --model "$dir/missing"
expect "--model of another shape" "2 layers" --model "$dir/two-layers"
expect "--no-adapter with --gains" "need the adapters" --no-adapter --gains
expect "--no-adapter with --compare-one" "need the adapters" --compare-one --no-adapter
expect "--kv-dtype q8_0" "--kv-dtype f32|f16|bf16" --kv-dtype q8_0

if python3 -S "$peer" --help >"$dir/stdout" 2>"$dir/stderr" &&
    grep -q "prepare" "$dir/stdout" && python3 -S "$peer" run --help >"$dir/stdout" 2>&1 &&
    grep -q -- "--llama-build" "$dir/stdout"; then
    echo "ok   peer_llama.py --help without site packages"
else
    echo "FAIL peer_llama.py --help without site packages:"
    sed 's/^/    /' "$dir/stderr" "$dir/stdout"
    failures=$((failures + 1))
fi

# peer_llama.py run refuses a storage it has no GGUF for before measuring
# anything: one it does not know, and q8_0 before prepare wrote its GGUF
mkdir "$dir/work"
peer_storage() {
    name=$1 storage=$2 pattern=$3
    if python3 -S "$peer" run --llama-build "$dir" --work "$dir/work" --storage "$storage" \
        >"$dir/stdout" 2>&1; then
        echo "FAIL peer_llama.py run $name: ran"
        failures=$((failures + 1))
    elif grep -q -F -- "$pattern" "$dir/stdout"; then
        echo "ok   peer_llama.py run $name"
    else
        echo "FAIL peer_llama.py run $name, expected '$pattern':"
        sed 's/^/    /' "$dir/stdout"
        failures=$((failures + 1))
    fi
}
peer_storage "--storage q4" f32,q4 "storages: f32, f16, q8_0"
peer_storage "--storage q8_0 without its GGUF" q8_0 "$dir/work/gpt2-small-q8_0.gguf"

echo "$((9 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
