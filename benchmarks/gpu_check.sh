#!/usr/bin/env bash
# The GPU check: every GPU row of BENCHMARKS.md from one short visit to a bare GPU machine.
#
#   bash benchmarks/gpu_check.sh          # on the GPU machine, from the tree's root (sized for about 8 min on one H100)
#   bash benchmarks/gpu_check.sh --cpu    # the same check at tiny sizes on the CPU (a few minutes)
#
# Needs only the image's python3 (torch, torchvision, timm, numpy, pillow, pyyaml, pytest) and the
# wheels of `make gpu-kit` in .gpu-kit/ (or $GPU_KIT), unpacked into a temporary folder: no network,
# no uv, no Ray, MLflow or Optuna. Each step runs in its own process under a time limit; a step that
# fails is reported and the next one runs. Writes gpu-check.md and gpu-check.json (and each step's
# log and JSON) under $OUT, or gpu-check-out/<UTC time>/ in the tree when $OUT is unset.
# Exit status: 0 every step passed, 1 some step failed (the report says which), 2 bad input.
# How the rows land in BENCHMARKS.md: docs/gpu-check.md.
set -u
MODE=cuda
for arg in "$@"; do
    case "$arg" in
        --cpu) MODE=cpu ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu_check.sh: unknown argument '$arg' (allowed: --cpu, --help)" >&2; exit 2 ;;
    esac
done
case "${OUT:-}" in ""|/*) ;; *) OUT="$PWD/$OUT" ;; esac  # a relative OUT is the caller's, not the tree's
cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { echo "gpu_check.sh: no '$PY' on PATH (set PYTHON to the image's interpreter)" >&2; exit 2; }
if [ "$MODE" = cuda ]; then
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
        || { echo "gpu_check.sh: torch.cuda.is_available() is False with $PY (no GPU? run with --cpu to check the check)" >&2; exit 2; }
fi
KIT=${GPU_KIT:-.gpu-kit}
OUT=${OUT:-gpu-check-out/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/steps" "$OUT/logs" || { echo "gpu_check.sh: cannot write to OUT='$OUT'" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
TARGET=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit.XXXXXX")
trap 'rm -rf "$TARGET"' EXIT
export PYTHONPATH="$TARGET:$PWD${PYTHONPATH:+:$PYTHONPATH}" GPU_CHECK_KIT_TARGET="$TARGET" HF_HUB_OFFLINE=1
if [ "$MODE" = cuda ]; then
    export MJP_GPU_TEST_DEVICE=cuda
    LIMITS="kit=60 environment=120 tests=150 model_eager=120 model_compiled=240 engine_eager=150 engine_compiled=300 input=300 april=90 host_syncs=150"
else
    export MJP_GPU_TEST_DEVICE=cpu
    LIMITS="kit=60 environment=300 tests=300 model_eager=300 model_compiled=300 engine_eager=300 engine_compiled=300 input=300 april=300 host_syncs=300"
fi
: > "$OUT/steps.tsv"
limit_of() { local pair; for pair in $LIMITS; do [ "${pair%%=*}" = "$1" ] && echo "${pair#*=}"; done; }

# run_step NAME COMMAND...: under NAME's time limit, its output in logs/NAME.log, its status in steps.tsv
run_step() {
    local name=$1 limit start rc
    shift
    limit=$(limit_of "$name")
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
}
step() { run_step "$1" "$PY" -m "benchmarks.gpu_check.$2" --mode "$MODE" --out "$OUT/steps/$1.json" "${@:3}"; }

echo "gpu check ($MODE): report and logs in $OUT"
run_step kit "$PY" -m benchmarks.gpu_check.kit "$KIT" "$TARGET"
step environment environment
run_step tests "$PY" -m pytest -q -o addopts= -p no:cacheprovider -m gpu tests/gpu tests/trainables/data/gpu/test_decode.py --junitxml "$OUT/steps/tests.xml"
step model_eager model_step
step model_compiled model_step --compile
step engine_eager engine_step
step engine_compiled engine_step --compile
step input input_path
step april april
step host_syncs host_syncs
"$PY" -m benchmarks.gpu_check.report "$OUT" > "$OUT/logs/report.log" 2>&1 || { cat "$OUT/logs/report.log" >&2; exit 1; }
cat "$OUT/gpu-check.md"
echo "report: $OUT/gpu-check.md, $OUT/gpu-check.json"
if awk -F'\t' '$2 != 0 { bad = 1 } END { exit bad ? 0 : 1 }' "$OUT/steps.tsv"; then
    exit 1
fi
exit 0
