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

if python3 -S "$peer" --help >"$dir/stdout" 2>"$dir/stderr" &&
    grep -q "prepare" "$dir/stdout" && python3 -S "$peer" run --help >"$dir/stdout" 2>&1 &&
    grep -q -- "--llama-build" "$dir/stdout"; then
    echo "ok   peer_llama.py --help without site packages"
else
    echo "FAIL peer_llama.py --help without site packages:"
    sed 's/^/    /' "$dir/stderr" "$dir/stdout"
    failures=$((failures + 1))
fi

echo "$((6 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
