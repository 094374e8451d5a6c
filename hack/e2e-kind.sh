#!/usr/bin/env bash
# The second half of `make e2e-kind`, after `make image kind-up kind-load`:
#
#  1. deploy manifests/ into the kind cluster and wait for the rollout: the image starts in a
#     real kubelet, its probes pass, its service account is enough to sync the caches (ready)
#     and one replica takes the lease kube-system/py-scheduler;
#  2. scale the Deployment to 0: the suite runs its own py-scheduler processes (profile
#     py-scheduler, lease py-scheduler) and must be the only scheduler of its pods;
#  3. keep kind's DaemonSets (kindnet, kube-proxy tolerate every taint) off kwok nodes, whose
#     capacity the tests count exactly, and start kwok on this machine with the local control
#     plane's stages, for the fake nodes the tests create (docs/control-plane.md);
#  4. E2E_KUBECONFIG=<kind kubeconfig> pytest -m e2e tests/e2e;
#  5. stop kwok and re-apply manifests/ (two replicas again), whatever the outcome.
#
# Env: KIND (kind), KIND_CLUSTER (py-scheduler), KIND_KUBECONFIG (required: where to write the
#      cluster's kubeconfig), PY (.venv/bin/python), PYTEST_ARGS (extra pytest arguments)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kind=${KIND:-kind}
cluster=${KIND_CLUSTER:-py-scheduler}
kubeconfig=${KIND_KUBECONFIG:?set KIND_KUBECONFIG to the file for the kind cluster kubeconfig}
py=${PY:-.venv/bin/python}
selector=app.kubernetes.io/name=py-scheduler

log() { printf '[e2e-kind] %s\n' "$*" >&2; }

bin_dir=$(hack/build-k8s.sh | tail -n1)
kubectl=("$bin_dir/kubectl" --kubeconfig "$kubeconfig")
mkdir -p "$(dirname "$kubeconfig")"
(umask 077 && "$kind" get kubeconfig --name "$cluster" >"$kubeconfig")
log "kind cluster $cluster, kubeconfig $kubeconfig"

show_scheduler() {
  "${kubectl[@]}" -n kube-system get pods -l "$selector" -o wide || true
  "${kubectl[@]}" -n kube-system describe pods -l "$selector" | tail -n 40 || true
  "${kubectl[@]}" -n kube-system logs -l "$selector" --tail=40 --prefix || true
}

# 1. The image in the cluster.
"${kubectl[@]}" apply -k manifests
if ! "${kubectl[@]}" -n kube-system rollout status deployment/py-scheduler --timeout=180s; then
  log "the py-scheduler Deployment did not become available"
  show_scheduler
  exit 1
fi
holder=""
for _ in $(seq 60); do
  holder=$("${kubectl[@]}" -n kube-system get lease py-scheduler \
    -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [[ -n "$holder" ]] && break
  sleep 1
done
if [[ -z "$holder" ]]; then
  log "no replica took the lease kube-system/py-scheduler within 60s"
  show_scheduler
  exit 1
fi
log "deployed: 2 replicas ready, leader $holder"

kwok_pid=""
kwok_dir=$(mktemp -d)
cleanup() {
  local code=$?
  if [[ -n "$kwok_pid" ]] && kill -0 "$kwok_pid" 2>/dev/null; then
    kill "$kwok_pid" && wait "$kwok_pid" 2>/dev/null || true
  fi
  log "restoring the py-scheduler Deployment (kubectl apply -k manifests)"
  "${kubectl[@]}" apply -k manifests >/dev/null || log "could not re-apply manifests/"
  rm -rf "$kwok_dir"
  exit "$code"
}
trap cleanup EXIT

# 2. The suite's schedulers only.
"${kubectl[@]}" -n kube-system scale deployment/py-scheduler --replicas=0
for _ in $(seq 120); do
  [[ -z "$("${kubectl[@]}" -n kube-system get pods -l "$selector" -o name)" ]] && break
  sleep 1
done
if [[ -n "$("${kubectl[@]}" -n kube-system get pods -l "$selector" -o name)" ]]; then
  log "the py-scheduler pods did not go away after scaling to 0"
  show_scheduler
  exit 1
fi

# 3. kwok for the fake nodes; kind's DaemonSets stay off them.
not_kwok='{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"type","operator":"NotIn","values":["kwok"]}]}]}}}}}}}'
for ds in $("${kubectl[@]}" -n kube-system get daemonsets -o name); do
  "${kubectl[@]}" -n kube-system patch "$ds" --type=strategic -p "$not_kwok" >/dev/null
  log "$ds: kept off nodes labelled type=kwok"
done
"$py" hack/localcluster.py kwok-config >"$kwok_dir/kwok.yaml"
kwok_port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Fake pod IPs from a range kind's pods do not use (kind's podSubnet is 10.244.0.0/16).
KWOK_WORKDIR="$kwok_dir/home" "$bin_dir/kwok" \
  --kubeconfig "$kubeconfig" \
  --config "$kwok_dir/kwok.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.250.0.0/16 \
  --node-lease-duration-seconds=40 \
  --server-address="127.0.0.1:$kwok_port" \
  >"$kwok_dir/kwok.log" 2>&1 &
kwok_pid=$!
kwok_healthy() {
  "$py" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' \
    "http://127.0.0.1:$kwok_port/healthz" >/dev/null 2>&1
}
for _ in $(seq 60); do
  kwok_healthy && break
  kill -0 "$kwok_pid" 2>/dev/null || break
  sleep 1
done
if ! kwok_healthy; then
  log "kwok did not become healthy; its log:"
  tail -n 20 "$kwok_dir/kwok.log" >&2
  exit 1
fi
log "kwok running (pid $kwok_pid, log $kwok_dir/kwok.log)"

# 4. The suite.
# shellcheck disable=SC2086  # PYTEST_ARGS is a list of words on purpose
E2E_KUBECONFIG="$kubeconfig" "$(dirname "$py")/pytest" -q -m e2e tests/e2e ${PYTEST_ARGS:-}
