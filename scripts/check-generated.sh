#!/usr/bin/env bash
# Fails when a generated file no longer matches the code it is generated from:
#   1. openapi.json, regenerated from the built service (run `npm run build` first);
#   2. libs/api-client/src/schema.d.ts, regenerated from the committed openapi.json;
#   3. src/database/sql/*.sql and src/database/functions/write-turn.values.ts, generated from the
#      database functions' declarations (fix with `npm run database:generate`);
# validates openapi.json against the OpenAPI 3.0 schema (@apidevtools/swagger-parser), and lints
# it with Redocly's recommended rules (redocly.yaml; exceptions with reasons in
# .redocly.lint-ignore.yaml), offline: no usage data, no check for a newer version.
# Fix a drift with `npm run openapi && npm run client:generate`, then commit both files.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failed=0

for bin in dist/bin/sync-openapi.js dist/bin/sync-database-sql.js; do
  if [[ ! -f $bin ]]; then
    echo "check-generated: $bin is missing; run 'npm run build' first." >&2
    exit 1
  fi
done

echo "==> openapi.json matches the code"
node dist/bin/sync-openapi.js "$tmp/openapi.json" >/dev/null
if ! diff -u --label 'openapi.json (committed)' --label 'openapi.json (from the code)' openapi.json "$tmp/openapi.json"; then
  echo "check-generated: openapi.json is out of date with the code. Run 'npm run openapi' and commit openapi.json." >&2
  failed=1
fi

echo "==> libs/api-client/src/schema.d.ts matches openapi.json"
schema=libs/api-client/src/schema.d.ts
# The lib's own `generate` script (same generator flags), writing to the temp file instead.
generate="$(node -e '
  const script = require("./libs/api-client/package.json").scripts.generate;
  if (!script.includes(" -o src/schema.d.ts")) throw new Error("libs/api-client: scripts.generate must write -o src/schema.d.ts");
  process.stdout.write(script.replace(" -o src/schema.d.ts", " -o " + JSON.stringify(process.argv[1])));
' "$tmp/schema.d.ts")"
if ! npm exec --workspace=@pushpop/api-client -- bash -c "$generate" >"$tmp/generate.log" 2>&1; then
  cat "$tmp/generate.log" >&2
  echo "check-generated: openapi-typescript failed on openapi.json." >&2
  exit 1
fi
if ! diff -u --label "$schema (committed)" --label "$schema (from openapi.json)" "$schema" "$tmp/schema.d.ts"; then
  echo "check-generated: $schema is out of date with openapi.json. Run 'npm run client:generate' and commit it." >&2
  failed=1
fi

echo "==> the database functions' generated files match their declarations"
node dist/bin/sync-database-sql.js --check || failed=1

echo "==> openapi.json is a valid OpenAPI document"
node scripts/validate-openapi.mjs openapi.json || failed=1

echo "==> openapi.json is clean under Redocly's recommended rules"
# The log is shown only on a problem: on Node 20 Redocly CLI prints a notice about Node 20's end
# of life on every run, which asks nothing of this project (Node 24 is supported as well).
if REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_NOTIFICATIONS=true npx --no-install redocly lint >"$tmp/redocly.log" 2>&1; then
  echo "openapi.json: no problems (redocly lint, recommended rules)"
else
  cat "$tmp/redocly.log" >&2
  echo "check-generated: redocly lint found problems in openapi.json. Fix them where the document is generated (src/bootstrap.ts, the decorators)." >&2
  failed=1
fi

if [[ $failed -ne 0 ]]; then
  echo "check-generated: FAILED" >&2
  exit 1
fi
echo "check-generated: openapi.json, the client schema and the database functions' files are up to date; openapi.json is valid and lint-clean"
