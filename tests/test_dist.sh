#!/bin/sh
# Suite 'dist' (built with -Dmpi=enabled): `mpirun -n 2 prefixcl train`.
#   usage: test_dist.sh PREFIXCL MPIRUN OUT_DIR [CASE [DIST_MODEL DEMO_DIR]]
#   CASE: curve (two ranks against one), kill, stop, fail, tune, pretrain
#   (default: all but tune and pretrain). tune needs tests/dist_model.c's
#   program and data/demo, pretrain data/demo.
#
# curve: the loss curve of two ranks (uneven shards: batch 5 = 2 + 3) matches
#   one rank's within a relative 1e-5 per step (LOSS_RTOL below); the
#   parameters of both ranks are identical after every step
#   (PREFIXCL_DIST_CHECK=1 prints one line per step or fails the run); a
#   second two-rank run is identical bit for bit (loss.csv and the prefixes).
# kill / stop: rank 1 killed (SIGKILL) or stopped (SIGSTOP, a hang) after
#   step 1: the job ends within BOUND_S seconds with a message naming rank 1.
# fail: rank 1 started with another seed, or on a device that does not
#   exist: the job ends with a message naming rank 1.
# tune: `prefixcl tune` of a tiny GPT-2 (batch 5 = 2 + 3 rows with uneven
#   label counts): two ranks against one as in curve; then a two-rank run
#   whose rank 1 is killed once a checkpoint exists, resumed with two ranks:
#   the checkpoint was whole and the resumed run ends bit for bit like an
#   uninterrupted one (loss.csv, the adapter, the gains); the same after a
#   SIGINT to rank 0 alone, which stops both ranks at one step (exit 130).
# pretrain: `prefixcl pretrain` of a tiny GPT-2, two ranks against one as in
#   curve; the optimizer's state sharded (the default) or not, on 2 and 4
#   ranks: the same bits; a two-rank run (sharded) whose rank 1 is killed
#   once a checkpoint exists is refused on 4 ranks and unsharded, naming the
#   2 ranks, then resumed on 2 ranks: bit for bit an uninterrupted run.
set -u
PREFIXCL=$1
MPIRUN=$2
OUT=$3
CASE=${4:-all}
DIST_MODEL=${5:-}
DEMO_DIR=${6:-}
# Why 1e-5: the ranks' gradients are the same sums in another order (each
# rank sums its rows on the device, rank 0 adds the ranks' sums in double),
# so they differ from one rank's by float32 rounding, a few 1e-7 relative;
# AdamW's steps carry that into the parameters. Measured over 40 steps on
# PoCL: at most 1.5e-7 relative.
LOSS_RTOL=1e-5
BOUND_S=90
STEPS=40

MPI_BASE="--oversubscribe"
[ "$(id -u)" -eq 0 ] && MPI_BASE="--allow-run-as-root $MPI_BASE"
MPI_ARGS="$MPI_BASE -n 2"
rm -rf "$OUT"
mkdir -p "$OUT"
fail=0
bad() {
    echo "FAIL: $*"
    fail=1
}

case_curve() {
    # --eval-every: each rank evaluates its rows of the held-out batch, rank 0
    # records their weighted mean (compared with one rank's below)
    "$PREFIXCL" train --steps $STEPS --batch 5 --eval-every 10 --out "$OUT/one" >"$OUT/one.log" 2>&1 ||
        bad "one rank: $(tail -3 "$OUT/one.log")"
    for run in two two-again; do
        PREFIXCL_DIST_CHECK=1 "$MPIRUN" $MPI_ARGS -x PREFIXCL_DIST_CHECK -x PREFIXCL_CACHE_DIR \
            "$PREFIXCL" train --steps $STEPS --batch 5 --eval-every 10 --out "$OUT/$run" >"$OUT/$run.log" 2>&1 ||
            bad "$run ranks: $(tail -5 "$OUT/$run.log")"
    done
    checks=$(grep -c "^dist check: step [0-9]*: parameters identical on 2 ranks" "$OUT/two.log")
    [ "$checks" = "$STEPS" ] || bad "parameters compared after $checks of $STEPS steps"
    compare_curves "$OUT/one/loss.csv" "$OUT/two/loss.csv" $STEPS 0.5
    for f in loss.csv prefixes.safetensors; do
        cmp -s "$OUT/two/$f" "$OUT/two-again/$f" || bad "two-rank runs differ in $f"
    done
}

compare_curves() { # one.csv two.csv steps fall (last loss below fall x the first)
    python3 - "$1" "$2" "$LOSS_RTOL" "$3" "$4" <<'EOF' ||
import csv, sys
rows_one = list(csv.DictReader(open(sys.argv[1])))
rows_two = list(csv.DictReader(open(sys.argv[2])))
# the training steps' rows (tune's step 0 holds only the evaluation before them)
one = [r for r in rows_one if r["loss"]]
two = [r for r in rows_two if r["loss"]]
rtol, steps, fall = float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
if len(one) != steps or len(two) != steps or len(rows_one) != len(rows_two):
    sys.exit(f"rows: {len(one)} and {len(two)} with a loss, want {steps}")
worst = 0.0
for a, b in zip(rows_one, rows_two):
    x, y = a.get("eval_loss", ""), b.get("eval_loss", "")
    if (x == "") != (y == ""):
        sys.exit(f"step {a['step']}: an evaluation loss in one run only")
    if x:
        rel = abs(float(x) - float(y)) / abs(float(x))
        worst = max(worst, rel)
        if not rel <= rtol:
            sys.exit(f"step {a['step']}: evaluation loss {x} with one rank, {y} with two (rel {rel:.2e})")
for a, b in zip(one, two):
    x, y = float(a["loss"]), float(b["loss"])
    rel = abs(x - y) / abs(x)
    worst = max(worst, rel)
    if not rel <= rtol:
        sys.exit(f"step {a['step']}: loss {x!r} with one rank, {y!r} with two (rel {rel:.2e})")
held = 0
for a, b in zip(one, two):
    x, y = a.get("heldout_loss", ""), b.get("heldout_loss", "")
    if (x == "") != (y == ""):
        sys.exit(f"step {a['step']}: a held-out loss in one run only")
    if x:
        held += 1
        rel = abs(float(x) - float(y)) / abs(float(x))
        worst = max(worst, rel)
        if not rel <= rtol:
            sys.exit(f"step {a['step']}: held-out loss {x} with one rank, {y} with two (rel {rel:.2e})")
if "heldout_loss" in one[0] and held != steps // 10:
    sys.exit(f"{held} held-out losses, want {steps // 10}")
if not float(one[-1]["loss"]) < fall * float(one[0]["loss"]):
    sys.exit("the loss did not fall: the curves compared are not a training run")
print(f"loss curves agree: worst relative difference {worst:.2e} (tolerance {rtol:g})")
EOF
        bad "loss curves differ"
}

case_tune() {
    [ -n "$DIST_MODEL" ] && [ -n "$DEMO_DIR" ] || { bad "tune needs DIST_MODEL DEMO_DIR"; return; }
    "$DIST_MODEL" "$OUT/model" "$DEMO_DIR" || { bad "dist_model failed"; return; }
    args="--model $OUT/model/gpt2-tiny --data $OUT/model/train.txt --prefix-len 5 --hidden 16 \
          --batch 5 --max-length 20 --gain tanh --quiet"
    "$PREFIXCL" tune $args --steps 30 --out "$OUT/tune-one" >"$OUT/tune-one.log" 2>&1 ||
        bad "tune, one rank: $(tail -3 "$OUT/tune-one.log")"
    for run in tune-two tune-two-again; do
        PREFIXCL_DIST_CHECK=1 "$MPIRUN" $MPI_ARGS -x PREFIXCL_DIST_CHECK "$PREFIXCL" tune $args \
            --steps 30 --out "$OUT/$run" >"$OUT/$run.log" 2>&1 ||
            bad "tune, $run: $(tail -5 "$OUT/$run.log")"
    done
    checks=$(grep -c "^dist check: step [0-9]*: parameters identical on 2 ranks" "$OUT/tune-two.log")
    [ "$checks" = 30 ] || bad "tune: parameters compared after $checks of 30 steps"
    compare_curves "$OUT/tune-one/loss.csv" "$OUT/tune-two/loss.csv" 30 0.9
    for f in loss.csv adapter_model.safetensors gains.safetensors; do
        cmp -s "$OUT/tune-two/$f" "$OUT/tune-two-again/$f" || bad "tune: two-rank runs differ in $f"
    done

    # killed after a checkpoint, resumed, against an uninterrupted run
    long="$args --steps 400 --checkpoint-every 2"
    "$MPIRUN" $MPI_ARGS "$PREFIXCL" tune $long --out "$OUT/tune-whole" >"$OUT/tune-whole.log" 2>&1 ||
        bad "tune, uninterrupted: $(tail -5 "$OUT/tune-whole.log")"
    wrapper tune
    rm -f "$OUT/rank1.pid"
    "$MPIRUN" $MPI_ARGS "$OUT/rank.sh" $long --out "$OUT/tune-cut" >"$OUT/tune-cut.log" 2>&1 &
    job=$!
    n=0
    until [ -f "$OUT/tune-cut/checkpoint.safetensors" ] && [ -f "$OUT/rank1.pid" ]; do
        n=$((n + 1))
        if [ $n -gt 3000 ] || ! kill -0 $job 2>/dev/null; then
            bad "tune: no checkpoint while the job ran: $(tail -5 "$OUT/tune-cut.log")"
            kill -TERM $job 2>/dev/null
            wait $job
            return
        fi
        sleep 0.1
    done
    kill -KILL "$(cat "$OUT/rank1.pid")"
    wait_job $job
    [ $rc -ne 0 ] || bad "tune: the job whose rank 1 was killed exited 0 (it ended first?)"
    "$MPIRUN" $MPI_ARGS "$PREFIXCL" tune $long --resume --out "$OUT/tune-cut" >"$OUT/tune-resume.log" 2>&1 ||
        bad "tune, resumed: $(tail -5 "$OUT/tune-resume.log")"
    for f in loss.csv adapter_model.safetensors gains.safetensors; do
        cmp -s "$OUT/tune-whole/$f" "$OUT/tune-cut/$f" || bad "tune: the resumed run differs in $f"
    done

    # SIGINT to rank 0 alone: both ranks stop at the same step, resumable
    rm -f "$OUT/rank0.pid" "$OUT/rank1.pid"
    "$MPIRUN" $MPI_ARGS "$OUT/rank.sh" $long --out "$OUT/tune-int" >"$OUT/tune-int.log" 2>&1 &
    job=$!
    n=0
    until [ -f "$OUT/tune-int/checkpoint.safetensors" ] && [ -f "$OUT/rank0.pid" ]; do
        n=$((n + 1))
        if [ $n -gt 3000 ] || ! kill -0 $job 2>/dev/null; then
            bad "tune: no checkpoint while the job ran: $(tail -5 "$OUT/tune-int.log")"
            kill -TERM $job 2>/dev/null
            wait $job
            return
        fi
        sleep 0.1
    done
    kill -INT "$(cat "$OUT/rank0.pid")"
    wait_job $job
    [ $rc -eq 130 ] || bad "tune: SIGINT to rank 0: exit $rc, not 130: $(tail -5 "$OUT/tune-int.log")"
    grep -q "^stopped after step" "$OUT/tune-int.log" || bad "tune: SIGINT to rank 0 did not stop the run"
    "$MPIRUN" $MPI_ARGS "$PREFIXCL" tune $long --resume --out "$OUT/tune-int" >"$OUT/tune-int2.log" 2>&1 ||
        bad "tune, resumed after SIGINT: $(tail -5 "$OUT/tune-int2.log")"
    for f in loss.csv adapter_model.safetensors gains.safetensors; do
        cmp -s "$OUT/tune-whole/$f" "$OUT/tune-int/$f" || bad "tune: the run resumed after SIGINT differs in $f"
    done
}

# prefixcl pretrain of a tiny GPT-2 from a config: two ranks (batch 5 = 2 + 3
# rows) against one within LOSS_RTOL per step, two two-rank runs identical,
# then rank 1 killed once a checkpoint exists and the run resumed with two
# ranks: bit for bit the uninterrupted run (loss.csv, weights, gains).
case_pretrain() {
    [ -n "$DEMO_DIR" ] || { bad "pretrain needs DEMO_DIR"; return; }
    cfg="$OUT/tiny.json"
    printf '{"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 2197, "n_positions": 32}' >"$cfg"
    args="--config $cfg --tokenizer $DEMO_DIR --data $DEMO_DIR/train.txt --block 16 --batch 5 --lr 3e-3 \
          --warmup 2 --gain tanh --gain-ramp 3 --quiet"
    "$PREFIXCL" pretrain $args --steps 20 --out "$OUT/pt-one" >"$OUT/pt-one.log" 2>&1 ||
        bad "pretrain, one rank: $(tail -3 "$OUT/pt-one.log")"
    for run in pt-two pt-two-again; do
        PREFIXCL_DIST_CHECK=1 "$MPIRUN" $MPI_ARGS -x PREFIXCL_DIST_CHECK -x PREFIXCL_CACHE_DIR "$PREFIXCL" \
            pretrain $args --steps 20 --out "$OUT/$run" >"$OUT/$run.log" 2>&1 ||
            bad "pretrain, $run: $(tail -5 "$OUT/$run.log")"
    done
    grep -q "rank 0 sends .* MiB of gradients a step .* MiB of updated parameters" "$OUT/pt-two.log" ||
        bad "pretrain: the bytes a rank sends are not printed: $(tail -3 "$OUT/pt-two.log")"
    grep -q "rank 1 of 2: AdamW state of .* MiB (unsharded: " "$OUT/pt-two.log" ||
        bad "pretrain: rank 1's share of the AdamW state is not printed: $(tail -3 "$OUT/pt-two.log")"
    # the optimizer sharded (the default) or not, 2 and 4 ranks: the same bits
    for n in 2 4; do
        for shard in --shard-optimizer --no-shard-optimizer; do
            "$MPIRUN" $MPI_BASE -n $n -x PREFIXCL_CACHE_DIR "$PREFIXCL" pretrain $args --steps 20 $shard \
                --out "$OUT/pt-$n$shard" >"$OUT/pt-$n$shard.log" 2>&1 ||
                bad "pretrain, $n ranks $shard: $(tail -5 "$OUT/pt-$n$shard.log")"
        done
        for f in loss.csv model.safetensors gains.safetensors; do
            cmp -s "$OUT/pt-$n--shard-optimizer/$f" "$OUT/pt-$n--no-shard-optimizer/$f" ||
                bad "pretrain, $n ranks: the sharded optimizer's run differs in $f"
        done
    done
    cmp -s "$OUT/pt-two/loss.csv" "$OUT/pt-2--shard-optimizer/loss.csv" ||
        bad "pretrain: sharding is not the default with 2 ranks"
    python3 - "$OUT/pt-one/loss.csv" "$OUT/pt-two/loss.csv" "$LOSS_RTOL" <<'EOF2' || bad "pretrain: the loss curves differ"
import csv, sys
one = [r for r in csv.DictReader(open(sys.argv[1])) if r["loss"]]
two = [r for r in csv.DictReader(open(sys.argv[2])) if r["loss"]]
rtol = float(sys.argv[3])
if len(one) != 20 or len(two) != 20:
    sys.exit(f"rows: {len(one)} and {len(two)}, want 20")
worst = max(abs(float(a["loss"]) - float(b["loss"])) / float(a["loss"]) for a, b in zip(one, two))
if not worst <= rtol:
    sys.exit(f"worst relative difference {worst:.2e} > {rtol}")
if not float(one[-1]["loss"]) < 0.9 * float(one[0]["loss"]):
    sys.exit("the loss did not fall")
print(f"pretrain loss curves agree: worst relative difference {worst:.2e}")
EOF2
    for f in loss.csv model.safetensors gains.safetensors; do
        cmp -s "$OUT/pt-two/$f" "$OUT/pt-two-again/$f" || bad "pretrain: two-rank runs differ in $f"
    done
    long="$args --steps 300 --checkpoint-every 2"
    "$MPIRUN" $MPI_ARGS "$PREFIXCL" pretrain $long --out "$OUT/pt-whole" >"$OUT/pt-whole.log" 2>&1 ||
        bad "pretrain, uninterrupted: $(tail -5 "$OUT/pt-whole.log")"
    wrapper pretrain
    rm -f "$OUT/rank1.pid"
    "$MPIRUN" $MPI_ARGS "$OUT/rank.sh" $long --out "$OUT/pt-cut" >"$OUT/pt-cut.log" 2>&1 &
    job=$!
    n=0
    until [ -f "$OUT/pt-cut/checkpoint.safetensors" ] && [ -f "$OUT/rank1.pid" ]; do
        n=$((n + 1))
        if [ $n -gt 3000 ] || ! kill -0 $job 2>/dev/null; then
            bad "pretrain: no checkpoint while the job ran: $(tail -5 "$OUT/pt-cut.log")"
            kill -TERM $job 2>/dev/null
            wait $job
            return
        fi
        sleep 0.05
    done
    kill -KILL "$(cat "$OUT/rank1.pid")"
    wait_job $job
    [ $rc -ne 0 ] || bad "pretrain: the job whose rank 1 was killed exited 0 (it ended first?)"
    grep -Eq "rank 1 .*(signal 9|Killed)|process rank 1" "$OUT/pt-cut.log" ||
        bad "pretrain: no message naming the killed rank 1: $(tail -8 "$OUT/pt-cut.log")"
    # each rank's part of the checkpoint resumes on as many ranks only
    for other in "4 --shard-optimizer" "2 --no-shard-optimizer"; do
        "$MPIRUN" $MPI_BASE -n ${other% *} "$PREFIXCL" pretrain $long ${other#* } --resume \
            --out "$OUT/pt-cut" >"$OUT/pt-other.log" 2>&1 &&
            bad "pretrain: resumed ($other ranks) from 2 ranks' sharded checkpoint"
        grep -q "sharded over 2 ranks.*resume with 2 ranks" "$OUT/pt-other.log" ||
            bad "pretrain, $other ranks: no message naming the 2 ranks: $(tail -5 "$OUT/pt-other.log")"
    done
    "$MPIRUN" $MPI_ARGS "$PREFIXCL" pretrain $long --resume --out "$OUT/pt-cut" >"$OUT/pt-resume.log" 2>&1 ||
        bad "pretrain, resumed: $(tail -5 "$OUT/pt-resume.log")"
    for f in loss.csv model.safetensors gains.safetensors; do
        cmp -s "$OUT/pt-whole/$f" "$OUT/pt-cut/$f" || bad "pretrain: the resumed run differs in $f"
    done
}

# Rank 1 runs through a wrapper that records its pid.
wrapper() {
    cat >"$OUT/rank.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-0}
echo \$\$ >"$OUT/rank\$rank.pid"
if [ "\$rank" = 1 ] && [ -n "\${RANK1_ARGS:-}" ]; then
    exec "$PREFIXCL" ${1:-train} \$RANK1_ARGS "\$@"
fi
exec "$PREFIXCL" ${1:-train} "\$@"
EOF
    chmod +x "$OUT/rank.sh"
}

# Waits for the job (pid $1) at most BOUND_S seconds; sets rc and took.
wait_job() {
    start=$(date +%s)
    while kill -0 "$1" 2>/dev/null; do
        took=$(($(date +%s) - start))
        if [ $took -gt $BOUND_S ]; then
            bad "the job still runs $BOUND_S s after rank 1 went away"
            kill -TERM "$1" 2>/dev/null # mpirun passes it on to the ranks
            break
        fi
        sleep 1
    done
    wait "$1"
    rc=$?
    took=$(($(date +%s) - start))
}

case_lost() { # $1: KILL or STOP
    wrapper
    rm -f "$OUT/rank1.pid"
    log="$OUT/lost-$1.log"
    PREFIXCL_DIST_TIMEOUT=15 "$MPIRUN" $MPI_ARGS -x PREFIXCL_DIST_TIMEOUT -x PREFIXCL_CACHE_DIR \
        "$OUT/rank.sh" --steps 100000 --out "$OUT/lost-$1" >"$log" 2>&1 &
    job=$!
    n=0
    until grep -q "^step 1/" "$log" 2>/dev/null; do
        n=$((n + 1))
        if [ $n -gt 300 ] || ! kill -0 $job 2>/dev/null; then
            bad "$1: step 1 never came: $(tail -5 "$log")"
            kill -TERM $job 2>/dev/null
            wait $job
            return
        fi
        sleep 1
    done
    pid=$(cat "$OUT/rank1.pid")
    kill -"$1" "$pid"
    wait_job $job
    kill -KILL "$pid" 2>/dev/null # a stopped rank the launcher left behind
    [ $rc -ne 0 ] || bad "$1: the job exited 0"
    case $1 in
    KILL) grep -Eq "rank 1 .*(signal 9|Killed)|process rank 1" "$log" ||
              bad "KILL: no message naming rank 1: $(tail -8 "$log")" ;;
    # A stopped rank 1 leaves rank 0 waiting in whichever exchange comes next
    # (the gradients, the stop flag or the evaluation's mean).
    STOP) grep -Eq "rank 0 of 2: [a-z ]+: nothing from rank 1 within 15 s" "$log" ||
              bad "STOP: no message naming rank 1: $(grep -m3 'rank 0' "$log"; tail -8 "$log")" ;;
    esac
    echo "$1: the job ended $took s after rank 1 went away (exit $rc)"
}

case_fail() {
    wrapper
    log="$OUT/fail-seed.log"
    RANK1_ARGS="--seed 2" "$MPIRUN" $MPI_ARGS -x RANK1_ARGS "$OUT/rank.sh" --steps 3 \
        --out "$OUT/fail-seed" >"$log" 2>&1 && bad "another seed on rank 1: the job exited 0"
    grep -q "rank 1 was started with another training configuration" "$log" ||
        bad "another seed: no message naming rank 1: $(tail -5 "$log")"
    log="$OUT/fail-device.log"
    RANK1_ARGS="--device no-such-device-anywhere" "$MPIRUN" $MPI_ARGS -x RANK1_ARGS \
        "$OUT/rank.sh" --steps 3 --out "$OUT/fail-device" >"$log" 2>&1 &&
        bad "a bad device on rank 1: the job exited 0"
    grep -q "rank 1 of 2: the command failed" "$log" ||
        bad "a bad device: no message naming rank 1: $(tail -5 "$log")"
}

case $CASE in
curve) case_curve ;;
kill) case_lost KILL ;;
stop) case_lost STOP ;;
fail) case_fail ;;
tune) case_tune ;;
pretrain) case_pretrain ;;
all) case_curve; case_lost KILL; case_lost STOP; case_fail ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "dist $CASE: ok"
exit $fail
