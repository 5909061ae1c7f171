#!/usr/bin/env bash
# Creates the API keys docker/compose.yaml mounts as secrets (once; an existing file is kept):
#   docker/secrets/api-keys      ops (admin) and prometheus (read), as API_KEYS_FILE entries
#   docker/secrets/metrics-key   the prometheus key alone, for Prometheus' credentials_file
# and prints the ops key. docker/secrets/ is ignored by git and by the image build.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p secrets
chmod 700 secrets
key() { head -c 32 /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'; }
if [ -e secrets/api-keys ]; then
  echo "docker/secrets/api-keys exists; keeping it" >&2
  exit 0
fi
umask 077
ops=$(key)
metrics=$(key)
printf '# name:key:scopes, one per line (README "Security")\nops:%s:admin\nprometheus:%s:read\n' "$ops" "$metrics" > secrets/api-keys
printf '%s' "$metrics" > secrets/metrics-key
# Read by the containers' unprivileged users (node, nobody) through the secret mounts.
chmod 644 secrets/api-keys secrets/metrics-key
echo "ops key (admin): $ops"
