#!/usr/bin/env bash
# Builds the two heavy test environments side by side, each in its own virtual environment:
# the vLLM engine (.venv-vllm, tests/adapters/setup_vllm.sh) and the Phoenix OTLP backend
# (.venv-phoenix, tests/export/setup_phoenix.sh). Both are idempotent; in parallel they take
# about as long as the slower one. A failure prints that step's log and exits non-zero.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
bash tests/adapters/setup_vllm.sh >"$logs/vllm.log" 2>&1 & vllm=$!
bash tests/export/setup_phoenix.sh >"$logs/phoenix.log" 2>&1 & phoenix=$!
status=0
for step in vllm phoenix; do
    pid=${!step}
    if wait "$pid"; then
        tail -n 1 "$logs/$step.log"
    else
        status=1
        echo "setup_engines: the $step environment failed to build; its log ends:" >&2
        tail -n 40 "$logs/$step.log" >&2
    fi
done
exit "$status"
