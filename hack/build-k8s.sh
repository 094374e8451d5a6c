#!/usr/bin/env bash
# Build (or reuse) the local control plane's binaries from Go modules:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
# into a version-keyed cache outside the repository.
#
# Usage: hack/build-k8s.sh            # prints the bin directory on the last line of stdout
#        hack/build-k8s.sh kubelet    # also the kubelet (the opt-in real node, docs/control-plane.md)
# Env:   PY_SCHEDULER_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/py-scheduler)
#        KUBE_BIN_DIR        if set, nothing is built: the directory is checked and printed
#
# Idempotent (a binary is built once; a .ok stamp marks a finished build) and safe to run
# concurrently (flock on the cache directory). Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
# Optional binaries, built only when asked for by name (only the real node needs them).
for extra in "$@"; do
  case "$extra" in
    kubelet) BINARIES+=(kubelet) ;;
    *) printf '[build-k8s] ERROR: unknown optional binary %s (known: kubelet)\n' "$extra" >&2; exit 2 ;;
  esac
done

log() { printf '[build-k8s] %s\n' "$*" >&2; }
die() { printf '[build-k8s] ERROR: %s\n' "$*" >&2; exit 1; }

if [[ -n "${KUBE_BIN_DIR:-}" ]]; then
  [[ -d "$KUBE_BIN_DIR" ]] || die "KUBE_BIN_DIR=$KUBE_BIN_DIR is not a directory"
  for b in "${BINARIES[@]}"; do
    [[ -x "$KUBE_BIN_DIR/$b" ]] || die "KUBE_BIN_DIR=$KUBE_BIN_DIR has no executable '$b' (needs: ${BINARIES[*]})"
  done
  echo "$KUBE_BIN_DIR"
  exit 0
fi

cache_root=${PY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/py-scheduler}
bin_dir="$cache_root/k8s-$KUBE_VERSION/bin"
work="$cache_root/k8s-$KUBE_VERSION/build"
mkdir -p "$bin_dir" "$work"

all_built() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$bin_dir/$b" && -f "$bin_dir/.$b.ok" ]] || return 1; done
}

if all_built; then echo "$bin_dir"; exit 0; fi

command -v go >/dev/null 2>&1 || die "no binaries in $bin_dir and no 'go' on PATH.
  Either install Go >= 1.26 (https://go.dev/dl) so the binaries can be built from modules,
  or set KUBE_BIN_DIR to a directory holding: ${BINARIES[*]} (Kubernetes $KUBE_VERSION)."

exec 9>"$cache_root/k8s-$KUBE_VERSION/.lock"
log "waiting for the build lock $cache_root/k8s-$KUBE_VERSION/.lock"
flock 9
if all_built; then echo "$bin_dir"; exit 0; fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
staging_version="v0.${KUBE_VERSION#v1.}"
start=$(date +%s)

# --- Kubernetes: a wrapper module that requires k8s.io/kubernetes and pins every staging
# module (which upstream's own go.mod replaces with ./staging/...) to its published v0.Y.Z.
kdir="$work/kubernetes"
mkdir -p "$kdir"
if [[ ! -f "$kdir/.resolved" ]]; then
  log "resolving k8s.io/kubernetes@$KUBE_VERSION (downloads a few hundred MB of modules once)"
  info=$(cd "$kdir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" 2>&1) || true
  gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")
  if grep -q '"Error"' <<<"$info" || [[ ! -f "$gomod" ]]; then
    die "could not download k8s.io/kubernetes@$KUBE_VERSION from the Go module proxy:
$info"
  fi
  {
    echo "module pyscheduler.local/k8sbuild"
    echo
    echo "go $(go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod" | while read -r m; do
      echo "	$m => $m $staging_version"
    done
    echo ")"
  } > "$kdir/go.mod"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    log "go get -tool k8s.io/kubernetes/cmd/$cmd"
    (cd "$kdir" && go get -tool "k8s.io/kubernetes/cmd/$cmd@$KUBE_VERSION") >&2
  done
  touch "$kdir/.resolved"
fi

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if [[ " ${BINARIES[*]} " == *" kubelet "* ]]; then
  k8s_cmds+=(kubelet)
  if [[ ! -f "$kdir/.resolved-kubelet" ]]; then
    log "go get -tool k8s.io/kubernetes/cmd/kubelet"
    (cd "$kdir" && go get -tool "k8s.io/kubernetes/cmd/kubelet@$KUBE_VERSION") >&2
    touch "$kdir/.resolved-kubelet"
  fi
fi
for cmd in "${k8s_cmds[@]}"; do
  [[ -f "$bin_dir/.$cmd.ok" ]] && continue
  log "building $cmd $KUBE_VERSION (several minutes on 2 cores)"
  t0=$(date +%s)
  (cd "$kdir" && go build -trimpath -ldflags "$ldflags" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") >&2
  mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
  touch "$bin_dir/.$cmd.ok"
  log "built $cmd in $(( $(date +%s) - t0 ))s"
done

# --- etcd: its own go.mod replaces sibling modules, so it also needs a wrapper module.
if [[ ! -f "$bin_dir/.etcd.ok" ]]; then
  edir="$work/etcd"
  mkdir -p "$edir"
  log "building etcd $ETCD_VERSION"
  cat > "$edir/go.mod" <<MOD
module pyscheduler.local/etcdbuild

go $(go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/')

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
MOD
  (cd "$edir" && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && \
     go build -trimpath -ldflags "-s -w" -o "$bin_dir/etcd.tmp" go.etcd.io/etcd/server/v3) >&2
  mv "$bin_dir/etcd.tmp" "$bin_dir/etcd"
  touch "$bin_dir/.etcd.ok"
fi

# --- kwok: plain go install at the pinned version.
if [[ ! -f "$bin_dir/.kwok.ok" ]]; then
  log "building kwok $KWOK_VERSION"
  GOBIN="$work/gobin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  mv "$work/gobin/kwok" "$bin_dir/kwok"
  touch "$bin_dir/.kwok.ok"
fi

all_built || die "build finished but binaries are missing in $bin_dir"
log "all binaries ready in $bin_dir ($(( $(date +%s) - start ))s)"
echo "$bin_dir"
