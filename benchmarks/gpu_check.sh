#!/usr/bin/env bash
# The GPU check: every GPU row of BENCHMARKS.md from one short visit to a bare GPU machine.
#
#   bash benchmarks/gpu_check.sh [--deadline SECONDS]   # on the GPU machine, from the tree's root
#   bash benchmarks/gpu_check.sh --cpu                  # the same check at tiny sizes on the CPU
#
# Needs only the image's python3 (torch, torchvision, timm, numpy, pillow, pyyaml) and the wheels
# of `make gpu-kit` in .gpu-kit/ (or $GPU_KIT; pytest, scikit-learn, pydantic, ... ), each held to
# uv.lock's name, size and sha256 before any is unpacked into a temporary folder: no network, no
# uv, no Ray, MLflow or Optuna. The GPU rows' steps run first, each in its own process under a
# time limit cut to what is left of --deadline (default 540 s for the whole check); a step that
# fails is reported and the next one runs; the report is rewritten after every step and names the
# steps the deadline left out. Writes gpu-check.md and gpu-check.json (and each step's log and
# JSON) under $OUT, or gpu-check-out/<UTC time>/ in the tree when $OUT is unset.
# Exit status: 0 every step passed, 1 some step failed or was not reached (the report says which),
# 2 bad input (a bad flag, no CUDA without --cpu, a kit that does not match uv.lock) before any step.
# How the rows land in BENCHMARKS.md: docs/gpu-check.md.
set -u
MODE=cuda
DEADLINE=540
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu) MODE=cpu ;;
        --deadline)
            case "${2:-}" in
                ''|*[!0-9]*) echo "gpu_check.sh: --deadline needs whole seconds >= 60, got '${2:-}'" >&2; exit 2 ;;
            esac
            [ "$2" -ge 60 ] || { echo "gpu_check.sh: --deadline needs whole seconds >= 60, got '$2'" >&2; exit 2; }
            DEADLINE=$2; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$1' (allowed: --cpu, --deadline SECONDS, --help)" >&2; exit 2 ;;
    esac
    shift
done
case "${OUT:-}" in ""|/*) ;; *) OUT="$PWD/$OUT" ;; esac  # a relative OUT is the caller's, not the tree's
cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "gpu_check.sh: no '$PY' on PATH (set PYTHON to the image's interpreter)" >&2; exit 2; }
# every step needs torch, timm and numpy from the interpreter itself (the kit carries the rest), and
# the GPU visit a CUDA device: one line, before any step, from one interpreter start (a second one
# cost 1.7 s of wall on the 2-core CPU machine); exit 3 is "imported, no CUDA", anything else a failed import
"$PY" -c "import sys, numpy, timm, torch; sys.exit(3 if sys.argv[1] == 'cuda' and not torch.cuda.is_available() else 0)" "$MODE" 2>/dev/null
case $? in
    0) ;;
    3) echo "gpu_check.sh: torch.cuda.is_available() is False with $PY (no GPU? run with --cpu to check the check)" >&2; exit 2 ;;
    *) echo "gpu_check.sh: $PY cannot import torch, timm and numpy; set PYTHON to the image's interpreter (here: PYTHON=.venv/bin/python)" >&2; exit 2 ;;
esac
KIT=${GPU_KIT:-.gpu-kit}
TARGET=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit.XXXXXX")
trap 'rm -rf "$TARGET"' EXIT
# the kit first: a wheel that is missing, cut short or not uv.lock's stops everything, in one line
KIT_LOG=$("$PY" -m benchmarks.gpu_check.kit "$KIT" "$TARGET" 2>&1) || { echo "$KIT_LOG" | grep -v '^\s*$' | tail -n 1 >&2; exit 2; }
OUT=${OUT:-gpu-check-out/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/steps" "$OUT/logs" || { echo "gpu_check.sh: cannot write to OUT='$OUT'" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
echo "$KIT_LOG" > "$OUT/logs/kit.log"
export PYTHONPATH="$TARGET:$PWD${PYTHONPATH:+:$PYTHONPATH}" GPU_CHECK_KIT_TARGET="$TARGET" HF_HUB_OFFLINE=1
if [ "$MODE" = cuda ]; then
    export MJP_GPU_TEST_DEVICE=cuda
    LIMITS="environment=60 input=200 model_eager=90 model_compiled=180 engine_eager=90 engine_compiled=180 host_syncs=90 tests=150 april=60"
else
    export MJP_GPU_TEST_DEVICE=cpu
    LIMITS="environment=300 input=300 model_eager=300 model_compiled=300 engine_eager=300 engine_compiled=300 host_syncs=300 tests=300 april=300"
fi
# the order they run in, the GPU rows' steps first: what a deadline cuts is what matters least
PLAN="environment input model_eager model_compiled engine_eager engine_compiled host_syncs tests april"
echo "$PLAN" > "$OUT/steps.plan"
echo "$DEADLINE" > "$OUT/deadline"
: > "$OUT/steps.tsv"
limit_of() { local pair; for pair in $LIMITS; do [ "${pair%%=*}" = "$1" ] && echo "${pair#*=}"; done; }
report() { "$PY" -m benchmarks.gpu_check.report "$OUT" > "$OUT/logs/report.log" 2>&1; }
#: seconds kept back from the deadline: timeout's grace before it kills (15) and the last report
RESERVE=25

# run_step NAME COMMAND...: under NAME's time limit (cut to what the deadline leaves), its output in
# logs/NAME.log, its status in steps.tsv; skipped, and so "not reached", when under 20 s are left
run_step() {
    local name=$1 limit left start rc
    shift
    left=$((DEADLINE - SECONDS - RESERVE))
    limit=$(limit_of "$name")
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 20 ]; then
        echo "== $name: not reached (${left} s left of the ${DEADLINE} s deadline)"
        return
    fi
    start=$SECONDS
    echo "== $name (limit ${limit} s)"
    timeout --kill-after=15 "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$limit" >> "$OUT/steps.tsv"
    if [ "$rc" -eq 0 ]; then
        echo "   ok, $((SECONDS - start)) s"
    else
        echo "   FAILED (exit $rc$( [ "$rc" -eq 124 ] && echo ", timed out")), going on: $(grep -v '^\s*$' "$OUT/logs/$name.log" | tail -n 1)"
    fi
    report
}
step() { run_step "$1" "$PY" -m "benchmarks.gpu_check.$2" --mode "$MODE" --out "$OUT/steps/$1.json" "${@:3}"; }

echo "gpu check ($MODE, deadline ${DEADLINE} s): report and logs in $OUT"
grep -v '^\s*$' "$OUT/logs/kit.log" | sed 's/^/   kit: /'
step environment environment
step input input_path
step model_eager model_step
step model_compiled model_step --compile
step engine_eager engine_step
step engine_compiled engine_step --compile
step host_syncs host_syncs
run_step tests "$PY" -m pytest -q -o addopts= -p no:cacheprovider -m gpu tests/gpu tests/trainables/data/gpu/test_decode.py --junitxml "$OUT/steps/tests.xml"
step april april
report || { cat "$OUT/logs/report.log" >&2; exit 1; }
cat "$OUT/gpu-check.md"
echo "report: $OUT/gpu-check.md, $OUT/gpu-check.json (${SECONDS} s)"
ran=$(wc -l < "$OUT/steps.tsv")
if [ "$ran" -lt "$(echo $PLAN | wc -w)" ] || awk -F'\t' '$2 != 0 { bad = 1 } END { exit bad ? 0 : 1 }' "$OUT/steps.tsv"; then
    exit 1
fi
exit 0
