#!/bin/sh
# `prefixcl bench` bad input: each case must fail with a clear message and a
# non-zero exit before any measurement, leaving no output (or temporary) file.
# Usage: test_bench_input.sh PATH/TO/prefixcl
set -u
exe=${1:?usage: test_bench_input.sh PATH/TO/prefixcl}
# shellcheck source=bench/expect_input.sh
. "$(dirname "$0")/expect_input.sh"

# expect NAME PATTERN ARGS...: `prefixcl bench ARGS...` fails that way
expect() {
    name=$1 pattern=$2
    shift 2
    expect_failure "$name" "$pattern" "$exe" bench "$@"
}

expect "unknown option" "unknown option '--bogus'" --bogus --json "$dir/out/run.json"
expect "option without its file" "--json needs a file name" --json
expect "--all with --device" "exclude each other" --all --device cpu --json "$dir/out/run.json"
expect "selector matching nothing" "no-such-device-xyz" \
    --device no-such-device-xyz --quick --json "$dir/out/run.json" --csv "$dir/out/run.csv"
expect "unwritable --json folder" "cannot write there" --quick --json "$dir/out/missing/run.json"
expect "--csv names a folder" "is a folder" --quick --csv "$dir/out"
expect "same file twice" "name the same file" --quick --json "$dir/out/x" --csv "$dir/out/x"

printf '{"tool": "prefixcl bench", "devices": [ {"name": "x", "tests": [' >"$dir/truncated.json"
expect "truncated --compare file" "not valid JSON" \
    --quick --compare "$dir/truncated.json" --json "$dir/out/run.json" --plot "$dir/out/run.png"
printf '{"tool": "prefixcl bench", "devices": [{"name": "x", "tests": [{"id": "sgemm.512", "status": "ok", "median_ms": "fast"}]}]}' \
    >"$dir/badfield.json"
expect "--compare with a bad field" "median_ms" --quick --compare "$dir/badfield.json" --json "$dir/out/run.json"
printf '[1, 2, 3]' >"$dir/other.json"
expect "--compare not a bench run" "not an object" --quick --compare "$dir/other.json"
expect "--compare file missing" "cannot open" --quick --compare "$dir/none.json"

mkfifo "$dir/fifo.json"
expect "--compare a FIFO" "not a regular file" --quick --compare "$dir/fifo.json"
rm -f "$dir/fifo.json"
# A private copy of a device node: it must be refused, not replaced.
if mknod "$dir/null-copy" c 1 3 2>/dev/null; then
    expect "--json a device node" "not a regular file" --quick --json "$dir/null-copy"
    if [ ! -c "$dir/null-copy" ]; then
        echo "FAIL --json a device node: the node was replaced"
        failures=$((failures + 1))
    fi
else
    echo "skip --json a device node (mknod not allowed)"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures case(s) failed"
    exit 1
fi
echo "all bad-input cases passed"
