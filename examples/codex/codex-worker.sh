#!/bin/sh
# Codex CLI as a loopproof worker: run as `codex-worker.sh CODEX [codex exec's options] TASK`.
#
# Codex takes its model server from a provider table in $CODEX_HOME/config.toml, never from
# OPENAI_BASE_URL, and the attempt's proxy address is known only inside the sandbox (the bridge
# sets OPENAI_BASE_URL and OPENAI_API_KEY there), so the table is written here, at the start of
# the attempt. CODEX_HOME is the workspace's .codex: it must be writable and not under TMPDIR
# (Codex refuses to put its helper binaries in a temporary folder). CODEX is the codex program,
# absolute or relative to this script's folder.
set -eu
case "$1" in
  /*) codex=$1 ;;
  *) codex=$(dirname "$0")/$1 ;;
esac
shift
: "${OPENAI_BASE_URL:?is set by loopproof for a node with an llm table}"
export CODEX_HOME="$PWD/.codex"
mkdir -p "$CODEX_HOME"
# web_search off: it is a hosted tool the upstream runs (and bills) outside the meter's bound;
# no update check and no analytics: the sandbox has no network but the proxy; no sub-agents
# (their tools come as a `namespace` tool, which the proxy does not take).
cat > "$CODEX_HOME/config.toml" <<TOML
model_provider = "loopproof"
web_search = "disabled"
check_for_update_on_startup = false

[model_providers.loopproof]
name = "loopproof proxy"
base_url = "$OPENAI_BASE_URL"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[agents]
enabled = false
TOML
# --dangerously-bypass-approvals-and-sandbox: no approval prompts (nobody answers them), and no
# sandbox of Codex's own: loopproof's bubblewrap sandbox confines the whole command.
exec "$codex" exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "$@" </dev/null
