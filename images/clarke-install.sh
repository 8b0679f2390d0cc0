#!/bin/sh
# Installs Clarke's locked Python environment in /opt/clarke/.venv, the same way in every
# Clarke image: uv (pinned) from PyPI, then `uv sync --frozen --no-dev` of the lock file.
# Extra arguments go to `uv sync` (images call it with --no-install-project first, with
# only pyproject.toml and uv.lock copied, so the dependency layer is cached apart from
# Clarke's own code).
set -eu
UV_VERSION=0.13.9
if ! command -v uv >/dev/null 2>&1; then
    python3 -m pip install --no-cache-dir --break-system-packages --root-user-action=ignore \
        "uv==$UV_VERSION"
fi
cd /opt/clarke
# Debian's Python, never a downloaded one; the system trust store for TLS.
UV_PROJECT_ENVIRONMENT=/opt/clarke/.venv UV_PYTHON_DOWNLOADS=never UV_NATIVE_TLS=1 \
    UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 uv sync --frozen --no-dev --no-cache "$@"
