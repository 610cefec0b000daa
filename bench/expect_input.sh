# Sourced by the bad-input tests: a scratch folder $dir (removed on exit), a
# failure count, and expect_failure NAME PATTERN CMD...: CMD must exit non-zero
# (not by the 60 s timeout), print PATTERN on stderr and leave no file in
# $dir/out.
dir=$(mktemp -d "${TMPDIR:-/tmp}/pfx-input-test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0

expect_failure() {
    name=$1 pattern=$2
    shift 2
    rm -rf "$dir/out" && mkdir "$dir/out"
    timeout 60 "$@" >"$dir/stdout" 2>"$dir/stderr"
    rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        echo "FAIL $name: exit status $rc"
        failures=$((failures + 1))
    elif ! grep -q -- "$pattern" "$dir/stderr"; then
        echo "FAIL $name: stderr lacks '$pattern':"
        sed 's/^/    /' "$dir/stderr"
        failures=$((failures + 1))
    elif [ -n "$(ls -A "$dir/out")" ]; then
        echo "FAIL $name: files left behind: $(ls -A "$dir/out")"
        failures=$((failures + 1))
    else
        echo "ok   $name (exit $rc): $(head -n 1 "$dir/stderr")"
    fi
}
