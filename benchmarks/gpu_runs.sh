#!/usr/bin/env bash
# Several `torch-wge train` runs (or `tune` workers) side by side on one lent GPU, within one
# call's time limit.
#
# A WGE step on a GPU waits on its Python side (a FB15k-237 step of the large recipe keeps an H200
# busy for about a fifth of its time), so several runs share one GPU at little cost to each. Each
# line of RUNS_FILE is `NAME COMMAND ARGS...`, COMMAND `train` or `tune`: the process
# `torch-wge COMMAND ARGS --out $RUNS/NAME` on CUDA, with `--time-limit MINUTES` (a run then stops,
# and is validated and tested as any run that stops early; a tune worker starts no new trial).
# Names `NAME@1`, `NAME@2`, ... share the folder $RUNS/NAME: tune workers of one study. The
# datasets are read from data/datasets (ignored by git: carry data/), copied into
# data/root/DATASET/raw so that nothing is downloaded.
#
#   bash benchmarks/gpu_runs.sh RUNS_FILE MINUTES [THREADS]
#
# Back in $OUT (default /tmp/gpu-runs): runs.tar.gz (the run folders without their checkpoints, and
# each run's console output), dmon.txt (the GPU's load every 5 s) and summary.txt (each run's last
# line and exit status).
set -uo pipefail
runs_file=$1 minutes=$2 threads=${3:-2}
OUT="${OUT:-/tmp/gpu-runs}"
RUNS=/tmp/gpu-runs-folders
mkdir -p "$OUT" "$RUNS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for dataset in data/datasets/*/; do
    name=$(basename "$dataset")
    mkdir -p "data/root/$name/raw" && cp "$dataset"* "data/root/$name/raw/"
done

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/summary.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__)" >> "$OUT/summary.txt" 2>&1
nvidia-smi dmon -s um -d 5 > "$OUT/dmon.txt" 2>&1 &
dmon=$!
declare -A pids
start=$SECONDS
while read -r name command args; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    if [[ "$command" != train && "$command" != tune ]]; then
        echo "gpu_runs.sh: $runs_file: '$name $command ...': the command is train or tune" >&2
        exit 2
    fi
    # shellcheck disable=SC2086  # ARGS is a list of options
    python3 -m torch_wge "$command" $args --root data/root --device cuda --out "$RUNS/${name%%@*}" \
        --no-progress --time-limit "$minutes" --threads "$threads" > "$RUNS/$name.out" 2>&1 &
    pids[$name]=$!
    echo "$name: python -m torch_wge $command $args --device cuda --time-limit $minutes --threads $threads" \
        >> "$OUT/summary.txt"
done < "$runs_file"
for name in "${!pids[@]}"; do
    wait "${pids[$name]}"
    echo "$name: exit $? after $((SECONDS - start)) s: $(tail -n 1 "$RUNS/$name.out")" >> "$OUT/summary.txt"
done
kill "$dmon" 2>/dev/null
tar -czf "$OUT/runs.tar.gz" --exclude='*.pt' -C "$RUNS" .
cat "$OUT/summary.txt"
