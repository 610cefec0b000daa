#!/bin/sh
# Every prefixcl command that prints a result fails (non-zero exit, a message
# on stderr) when standard output cannot be written: a private copy of
# /dev/full (mknod; skipped, exit 77, where that is not allowed), and a pipe
# closed by its reader. Usage: test_cli_stdout.sh PATH/TO/prefixcl
set -u
exe=${1:?usage: test_cli_stdout.sh PATH/TO/prefixcl}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pfx-cli-stdout.XXXXXX")
trap 'rm -rf "$dir"' EXIT
if ! mknod "$dir/full" c 1 7 2>/dev/null; then
    echo "mknod not allowed: skipped"
    exit 77
fi
failures=0
check() {
    name=$1
    shift
    "$exe" "$@" >"$dir/full" 2>"$dir/stderr"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "FAIL $name: exit 0 with a full standard output"
        failures=$((failures + 1))
    elif ! grep -q "standard output" "$dir/stderr"; then
        echo "FAIL $name: stderr does not say why:"
        sed 's/^/    /' "$dir/stderr"
        failures=$((failures + 1))
    else
        echo "ok   $name (exit $rc): $(head -n 1 "$dir/stderr")"
    fi
}
check "help" --help
check "devices" devices
check "devices --json" devices --json
check "kernel-configs" kernel-configs
check "bench --help" bench --help
check "train --help" train --help
check "tune --help" tune --help
check "gemm-tune --help" gemm-tune --help
check "tokenize --help" tokenize --help
check "experiment gain --help" experiment gain --help
# and a command that succeeds still exits 0 when stdout is fine
if ! "$exe" devices >"$dir/ok" 2>&1; then
    echo "FAIL devices with a good stdout"
    failures=$((failures + 1))
fi
if [ "$failures" -ne 0 ]; then
    echo "$failures case(s) failed"
    exit 1
fi
echo "all commands check their standard output"
