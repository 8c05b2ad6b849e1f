#!/usr/bin/env bash
# Installs the Phoenix tracing backend (arize-phoenix, ~820 MB) into its own virtual
# environment, .venv-phoenix, so that its dependencies never clash with ours. The export
# tests start `phoenix serve` from there on 127.0.0.1 and read spans back with its client.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv-phoenix/bin/phoenix ]; then
    python3 -m venv .venv-phoenix
    .venv-phoenix/bin/pip install -q 'arize-phoenix>=12' 'arize-phoenix-client'
fi
echo "$(pwd)/.venv-phoenix"
