#!/usr/bin/env bash
# Lints docs/openapi.yaml with Redocly CLI (npm, pinned in tests/openapi/package-lock.json):
# the recommended rules, 0 errors and 0 warnings, except what tests/openapi/redocly.yaml and
# .redocly.lint-ignore.yaml switch off, each with its reason. Installs the linter on first use.
set -euo pipefail
cd "$(dirname "$0")/../tests/openapi"
if [[ ! -x node_modules/.bin/redocly ]]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
out=$(node_modules/.bin/redocly lint --config redocly.yaml --format=stylish ../../docs/openapi.yaml 2>&1) ||
  { echo "$out"; echo "lint-openapi: docs/openapi.yaml has errors"; exit 1; }
if grep -q "warning" <<<"$out"; then
  echo "$out"; echo "lint-openapi: docs/openapi.yaml has warnings"; exit 1
fi
echo "lint-openapi: docs/openapi.yaml passes Redocly's recommended rules"
