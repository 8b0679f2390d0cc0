#!/usr/bin/env bash
# Validates .github/workflows with actionlint (GitHub Actions itself cannot run here).
set -euo pipefail
cd "$(dirname "$0")/.."
ACTIONLINT_VERSION=v1.7.7
if ! command -v actionlint >/dev/null 2>&1 && [[ ! -x "$(go env GOPATH 2>/dev/null)/bin/actionlint" ]]; then
  go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi
PATH="$(go env GOPATH)/bin:$PATH" actionlint -no-color "$@"
