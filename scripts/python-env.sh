#!/usr/bin/env bash
# A virtual environment with what the Python package builds and tests with
# (python/requirements-dev.txt, from PyPI), made once under build/; prints its interpreter.
# CUBERT_PYTHON picks the Python it is made from (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CUBERT_PYTHON_VENV:-build/python-venv}
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s python/requirements-dev.txt "$stamp"; then
  "${CUBERT_PYTHON:-python3}" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -r python/requirements-dev.txt >&2
  cp python/requirements-dev.txt "$stamp"
fi
echo "$(cd "$venv" && pwd)/bin/python"
