#!/usr/bin/env bash
# The first command to run on a lent GPU machine, before changing anything: in one call that fits
# a 10-minute limit, what the GPU path computes and how fast, so that a session's scarce device
# time goes to changes, not to finding the baseline.
#
# On this machine, from the repository root (data/ is ignored by git, so it travels only when
# carried):
#   mkdir -p data/datasets && cp -r ../shared/datasets/{codex-s,fb15k-237} data/datasets/
# then run `bash benchmarks/gpu_first_call.sh` there, carrying data/ (a copy of about 24 MB).
# To time an earlier commit beside this one in the same run (step 2), check it out under data/ too:
#   mkdir -p data/baseline && git archive <commit> torch_wge | tar -x -C data/baseline
# (its torch_wge then runs the same epoch, imported through PYTHONPATH, as `wge@baseline`).
# On the GPU machine torch and torch_geometric come with its python3 and nothing can be installed,
# so the package is imported from the checkout (PYTHONPATH) instead of being installed. Each step
# has its own time limit; the outputs land in $OUT (default /tmp/gpu-first-call): machine.txt,
# summary.txt and steps.tar.gz, which holds each step's console output and JSON record (a call
# returns at most 8 files); the command prints what each step printed last.
# STEPS="cuda-tests fb15k-237-large-eager" runs only the steps named. A copy of the research code
# (https://github.com/vinhsuhi/WGE) under data/research adds its epoch beside torch_wge's.
#
# 1. the CUDA tests (training, resuming and evaluation equal the CPU's);
# 2. FB15k-237 under the large recipe's step (256 channels, batch 1024, sampled softmax over 2000
#    candidates): seconds per epoch from 40 batches and the kernel launches per batch, eager (and the
#    baseline's epoch, when data/baseline holds one);
# 3. the same with the encoder under torch.compile(mode="reduce-overhead") (CUDA graphs of the
#    encoder, whose shapes never change; its last loss and MRR against the eager step's), then with
#    the decoders' queries compiled too (their dropout then draws other numbers), and the whole step
#    as one CUDA graph (gpu_graph_step.py: all entities scored, pairs padded; checked in float64);
#    the research code beside torch_wge on CoDEx-S, when a checkout of it is under data/research
#    (bench_research_code.py; scipy is on the GPU machine's image);
# 4. where that step waits for the GPU: its host synchronisations, by line (gpu_syncs.py);
# 5. `torchrun` with the nccl backend, one process on the one GPU, 3 epochs of CoDEx-S;
# 6. the example on CoDEx-S with --device cuda over 20 epochs of the fast recipe.
# At their time limits all steps would take about 17 minutes: name STEPS to fit one call.
set -uo pipefail
OUT="${OUT:-/tmp/gpu-first-call}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ ! -f data/datasets/fb15k-237/train.txt ] || [ ! -f data/datasets/codex-s/train.txt ]; then
    echo "gpu_first_call.sh: no data/datasets/{codex-s,fb15k-237}/train.txt: copy them and carry data/" >&2
    exit 2
fi
mkdir -p data/root/codex-s/raw && cp data/datasets/codex-s/* data/root/codex-s/raw/

step() {  # step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output in $OUT/NAME.txt
    local name=$1 limit=$2
    shift 2
    [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]] && return  # STEPS="NAME ...": only these steps
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $? after $((SECONDS - start)) s" >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/machine.txt" 2>&1
python3 -c "import torch, torch_geometric; print('torch', torch.__version__, 'torch_geometric', torch_geometric.__version__)" \
    >> "$OUT/machine.txt" 2>&1
step cuda-tests 100 python3 -m pytest -q -p no:cacheprovider tests/training/test_cuda.py
baseline=()
[ -f data/baseline/torch_wge/__init__.py ] && baseline=(--baseline data/baseline)
step fb15k-237-large-eager 150 python3 benchmarks/bench_speed.py --dataset fb15k-237 --data-dir data/datasets \
    "${baseline[@]}" --only wge --device cuda --objective softmax --candidates 2000 --batch-size 1024 --max-batches 40 \
    --epochs-timed 3 --eval-repeats 1 --profile 8 --profile-rows 15 --json "$OUT/fb15k-237-large-eager.json"
step fb15k-237-large-compiled 150 python3 benchmarks/bench_speed.py --dataset fb15k-237 --data-dir data/datasets \
    --only wge --device cuda --objective softmax --candidates 2000 --batch-size 1024 --max-batches 40 \
    --epochs-timed 3 --eval-repeats 1 --compile-encoder reduce-overhead --json "$OUT/fb15k-237-large-compiled.json"
step fb15k-237-large-compiled-queries 150 python3 benchmarks/bench_speed.py --dataset fb15k-237 --data-dir data/datasets \
    --only wge --device cuda --objective softmax --candidates 2000 --batch-size 1024 --max-batches 40 \
    --epochs-timed 3 --eval-repeats 1 --compile-encoder reduce-overhead --compile-queries reduce-overhead \
    --json "$OUT/fb15k-237-large-compiled-queries.json"
step fb15k-237-graph-step 150 python3 benchmarks/gpu_graph_step.py --dataset fb15k-237 --data-dir data/datasets \
    --device cuda --json "$OUT/fb15k-237-graph-step.json"
[ -f data/research/main.py ] && step research-code 120 python3 benchmarks/bench_research_code.py \
    --research-code data/research --dataset codex-s --data-dir data/datasets --device cuda --threads 2 \
    --rounds 1 --epochs 3 --json "$OUT/research-code.json"
step fb15k-237-large-syncs 75 python3 benchmarks/gpu_syncs.py --dataset fb15k-237 --data-dir data/datasets \
    --candidates 2000 --json "$OUT/fb15k-237-large-syncs.json"
step torchrun-nccl 90 python3 -m torch.distributed.run --standalone --nproc_per_node 1 -m torch_wge train \
    --dataset codex-s --root data/root --epochs 3 --eval-every 1 --device cuda --backend nccl \
    --out /tmp/gpu-first-call-nccl --overwrite --no-progress
step codex-s-example 60 python3 examples/link_pred_codex.py --dataset codex-s --root data/root --epochs 20 --device cuda

# at most 8 files come back from a call: the steps' outputs and records travel as one archive
(cd "$OUT" && ls | grep -v -e summary.txt -e machine.txt | xargs tar -czf steps.tar.gz --remove-files)
cat "$OUT/machine.txt"
for name in cuda-tests fb15k-237-large-eager fb15k-237-large-compiled fb15k-237-large-compiled-queries \
    fb15k-237-graph-step research-code fb15k-237-large-syncs torchrun-nccl codex-s-example; do
    tar -xzOf "$OUT/steps.tar.gz" "$name.txt" > /tmp/step.txt 2>/dev/null || continue
    echo "== $name"
    tail -n 12 /tmp/step.txt
done
cat "$OUT/summary.txt"
