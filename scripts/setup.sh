#!/usr/bin/env bash
# Set up emergence in ./.venv: a virtual environment, torch, and the project with its
# dependencies (editable, with the dev extra). Idempotent: a second run only checks.
#
# torch: on a machine without an NVIDIA GPU the CPU build is installed (a few hundred
# MB), never the multi-GB CUDA build that plain `pip install torch` pulls on Linux.
# Set TORCH_SPEC to choose another build, e.g. TORCH_SPEC="torch==2.9.1".
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --progress-bar off)

if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ -n "${TORCH_SPEC:-}" ]; then
    "${PIP[@]}" "$TORCH_SPEC"
  elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "${PIP[@]}" "torch>=2.4"
  else
    # The CPU build: a local wheel or mirror that offers it, else PyTorch's CPU index.
    "${PIP[@]}" "torch==2.13.0+cpu" 2>/dev/null \
      || "${PIP[@]}" "torch>=2.4" --index-url https://download.pytorch.org/whl/cpu
  fi
fi

# The project, editable with its dev extra, and its dependencies: through uv where it can be had
# (it resolves, downloads and installs in parallel: about 20 s where pip takes about 60 s on 2
# cores, the same versions), from the sources pip is configured with (scripts/pip_sources.py),
# else through pip. torch, installed above, stays: it satisfies the project's range.
if "${PIP[@]}" uv 2>/dev/null && mapfile -t SOURCES < <(.venv/bin/python scripts/pip_sources.py) \
    && .venv/bin/uv pip install --quiet "${SOURCES[@]}" --python .venv/bin/python --compile-bytecode \
      -e ".[dev]" 2>/dev/null; then
  :
else
  echo "setup: uv could not install the project here; installing it with pip"
  "${PIP[@]}" -e ".[dev]"
fi
.venv/bin/python -c "import torch, transformers, mlflow, hydra; print(f'emergence ready: torch {torch.__version__}, transformers {transformers.__version__}, mlflow {mlflow.__version__}, hydra {hydra.__version__}')"
