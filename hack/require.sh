#!/usr/bin/env bash
# Check the tools a make target needs, and fail with a message that says what is missing,
# what needs it and where to get it, instead of a confusing error halfway through.
#
# Usage: hack/require.sh TOOL...    TOOL: docker (the CLI and a reachable engine) | kind | kubectl
# Env:   DOCKER, KIND, KUBECTL      the commands to check (default: docker, kind, kubectl)
set -euo pipefail

fail() {
  printf 'error: %s\n' "$1" >&2
  shift
  local line
  for line in "$@"; do printf '       %s\n' "$line" >&2; done
  exit 1
}

for tool in "$@"; do
  case "$tool" in
    docker)
      docker=${DOCKER:-docker}
      command -v "$docker" >/dev/null 2>&1 ||
        fail "'$docker' is not installed; building and loading the image needs Docker." \
          "Install Docker Engine: https://docs.docker.com/engine/install/"
      if ! out=$(timeout 30 "$docker" info 2>&1 >/dev/null); then
        fail "'$docker info' failed: no Docker engine is reachable; building and loading the image needs one." \
          "${out%%$'\n'*}" \
          "Start the engine (e.g. 'sudo systemctl start docker') or point DOCKER_HOST at one."
      fi
      ;;
    kind)
      kind=${KIND:-kind}
      command -v "$kind" >/dev/null 2>&1 ||
        fail "'$kind' is not installed; the kind targets need it (and Docker)." \
          "Install kind: https://kind.sigs.k8s.io/docs/user/quick-start/#installation" \
          "(e.g. 'go install sigs.k8s.io/kind@latest'), or set KIND to its path."
      ;;
    kubectl)
      kubectl=${KUBECTL:-kubectl}
      command -v "$kubectl" >/dev/null 2>&1 ||
        fail "'$kubectl' is not installed; deploying needs kubectl (with -k, v1.14 or newer)." \
          "Install it: https://kubernetes.io/docs/tasks/tools/ ; or use the one 'make binaries'" \
          "builds: KUBECTL=\$(hack/build-k8s.sh | tail -n1)/kubectl"
      ;;
    *)
      fail "hack/require.sh: unknown tool '$tool' (known: docker kind kubectl)"
      ;;
  esac
done
