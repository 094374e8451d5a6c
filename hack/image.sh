#!/usr/bin/env bash
# Build py-scheduler's container image, on a machine that may have nothing installed.
#
# Usage: hack/image.sh IMAGE VERSION REVISION [SAVE_TAR]
# Env:   DOCKER              the docker CLI (default: docker)
#        BASE_IMAGE          the Python base for both stages; default: python:3.11-slim when
#                            present or pullable, otherwise a Debian bookworm + python3 base
#                            built here with debootstrap from Debian's packages (no registry)
#        DEBIAN_MIRROR       where debootstrap downloads from (default: http://deb.debian.org/debian)
#        PY_SCHEDULER_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/py-scheduler)
#        PIP                 the pip that downloads the wheels (default: python3 -m pip)
#        WHEELHOUSE=0        let the build's pip reach the index itself instead (see below)
#
# The dependencies: pip inside the build has neither the host's proxy nor its CAs, so by
# default the pinned wheels (requirements.lock plus the build backend) are downloaded on the
# host with the host's pip settings into the cache, served read-only on 127.0.0.1 for the
# length of the build, and the builder stage installs from there alone (PIP_NO_INDEX=1).
#
# The engine: an engine that `docker info` already reaches is used as is. Otherwise, as root
# with apt-get, this script installs Debian's docker.io (saying so) and starts a private
# dockerd for the length of the build: state under the cache (layers are reused by the next
# build), socket and exec root under /run/py-scheduler/docker-<hash>, no bridge and no
# iptables rules (the build's RUN steps use the host network to reach PyPI), stopped again
# on exit.
# SAVE_TAR: also `docker save` the image there (the real node imports it into its containerd).
set -euo pipefail

log() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'printf "[image] ERROR: line %s: %s failed\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

[[ $# -ge 3 ]] || die "usage: hack/image.sh IMAGE VERSION REVISION [SAVE_TAR]"
image=$1 version=$2 revision=$3 save_tar=${4:-}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
docker=${DOCKER:-docker}
cache_root=${PY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/py-scheduler}
public_base=python:3.11-slim
local_base=py-scheduler-base:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export DOCKER_BUILDKIT=0 # the classic builder: BuildKit would fetch its frontend from a registry

apt_install() {
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 ||
    die "$1 is missing and cannot be installed here (needs root and apt-get); install $2 and retry"
  log "installing $2 with apt-get (Debian's packages; needs the Debian mirror)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >&2; } ||
    die "apt-get install $2 failed; install it by hand and retry"
}

# --- the engine ----------------------------------------------------------------------------
own_pid=""
stop_own_dockerd() {
  [[ -n "$own_pid" ]] || return 0
  log "stopping the private dockerd (pid $own_pid)"
  kill "$own_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$own_pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$own_pid" 2>/dev/null || true
  # dockerd leaves its netns bind mount (exec/netns/default) behind: unmount, then remove.
  local point
  while read -r point; do umount --lazy "$point" 2>/dev/null || true; done < <(
    awk -v run="$run/" 'index($5, run) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  rm -rf "$run"
  own_pid=""
}

if command -v "$docker" >/dev/null 2>&1 && timeout 20 "$docker" info >/dev/null 2>&1; then
  log "using the running Docker engine ($("$docker" info -f '{{.ServerVersion}}' 2>/dev/null))"
else
  command -v dockerd >/dev/null 2>&1 || apt_install dockerd docker.io
  command -v "$docker" >/dev/null 2>&1 || docker=/usr/bin/docker
  state="$cache_root/docker"
  # Short (unix socket paths are limited), and one per cache, like the state and its lock.
  run=/run/py-scheduler/docker-$(printf '%s' "$state" | sha256sum | cut -c1-8)
  mkdir -p "$state" "$run"
  exec 8>"$state/.lock"
  log "waiting for the private dockerd's lock $state/.lock"
  flock 8
  if [[ -f "$run/dockerd.pid" ]] && kill -0 "$(cat "$run/dockerd.pid")" 2>/dev/null; then
    # We hold the lock, so this dockerd was left by a run that was killed: stop it first.
    own_pid=$(cat "$run/dockerd.pid"); stop_own_dockerd
  fi
  trap stop_own_dockerd EXIT
  log "starting a private dockerd (state $state, socket $run/docker.sock, log $state/dockerd.log)"
  dockerd --data-root "$state/data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
    --host "unix://$run/docker.sock" --bridge none --iptables=false --ip-masq=false \
    --userland-proxy=false >"$state/dockerd.log" 2>&1 &
  own_pid=$!
  export DOCKER_HOST="unix://$run/docker.sock"
  for _ in $(seq 1 120); do
    timeout 5 "$docker" info >/dev/null 2>&1 && break
    kill -0 "$own_pid" 2>/dev/null || die "dockerd exited; last lines of $state/dockerd.log:
$(tail -n 5 "$state/dockerd.log")"
    sleep 0.5
  done
  timeout 5 "$docker" info >/dev/null 2>&1 || die "dockerd did not answer within 60s; see $state/dockerd.log"
  log "dockerd $("$docker" info -f '{{.ServerVersion}}') up ($("$docker" info -f '{{.Driver}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}'))"
fi

# --- the base image ------------------------------------------------------------------------
build_local_base() {
  local tar="$cache_root/base/bookworm-python3.tar"
  if [[ ! -f "$tar" ]]; then
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap debootstrap
    local root="$cache_root/base/rootfs.tmp"
    rm -rf "$root"; mkdir -p "$root"
    log "building the base $local_base: debootstrap bookworm + python3 from $mirror (a few minutes, once)"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$root" "$mirror" >"$cache_root/base/debootstrap.log" 2>&1 ||
      die "debootstrap failed; see $cache_root/base/debootstrap.log (set DEBIAN_MIRROR or BASE_IMAGE)"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* \
      "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/info "$root"/usr/share/locale
    tar --numeric-owner -C "$root" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$root"
  fi
  log "importing $tar as $local_base"
  "$docker" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    --message "debootstrap bookworm minbase + python3 (hack/image.sh)" "$tar" "$local_base" >/dev/null
}

if [[ -n "${BASE_IMAGE:-}" ]]; then
  base=$BASE_IMAGE
elif "$docker" image inspect "$public_base" >/dev/null 2>&1; then
  base=$public_base
elif log "pulling $public_base" && timeout 60 "$docker" pull "$public_base" >/dev/null 2>&1; then
  base=$public_base
else
  log "$public_base is not pullable here (no registry): using the locally built base"
  base=$local_base
  "$docker" image inspect "$local_base" >/dev/null 2>&1 || build_local_base
fi

# --- the wheels ----------------------------------------------------------------------------
pip_args=()
server_pid=""
stop_server() { [[ -z "$server_pid" ]] || kill "$server_pid" 2>/dev/null || true; }
trap 'stop_server; stop_own_dockerd' EXIT
if [[ "${WHEELHOUSE:-1}" != 0 ]]; then
  read -r -a pip <<<"${PIP:-python3 -m pip}"
  lock_hash=$(cat "$repo/requirements.lock" "$repo/pyproject.toml" | sha256sum | cut -c1-16)
  wheels="$cache_root/wheelhouse/$lock_hash"
  if [[ ! -f "$wheels/.ok" ]]; then
    log "downloading the pinned wheels with the host's pip into $wheels"
    platforms=()
    arch=$(uname -m)
    for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
    mkdir -p "$wheels"
    "${pip[@]}" download --quiet --dest "$wheels" --only-binary=:all: --python-version 3.11 \
      --implementation cp --abi cp311 --abi abi3 --abi none "${platforms[@]}" --platform any \
      --requirement "$repo/requirements.lock" "setuptools>=77" wheel >&2 ||
      die "pip download of requirements.lock failed (is PyPI reachable with pip's settings?); or build with WHEELHOUSE=0"
    touch "$wheels/.ok"
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m http.server --bind 127.0.0.1 --directory "$wheels" "$port" >/dev/null 2>&1 &
  server_pid=$!
  for _ in $(seq 1 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/', timeout=2)" 2>/dev/null && break
    sleep 0.2
  done
  pip_args=(--build-arg PIP_NO_INDEX=1 --build-arg "PIP_FIND_LINKS=http://127.0.0.1:$port/")
fi

# --- the build -----------------------------------------------------------------------------
log "docker build -t $image (base $base)"
"$docker" build --network host --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version" \
  --build-arg "REVISION=$revision" "${pip_args[@]}" -t "$image" "$repo" >&2
stop_server
user=$("$docker" image inspect -f '{{.Config.User}}' "$image")
[[ "$user" == 10001:10001 ]] || die "$image runs as '$user', expected 10001:10001"
got=$("$docker" run --rm --network none --entrypoint py-scheduler "$image" version)
uid=$("$docker" run --rm --network none --entrypoint python "$image" -c 'import os; print(os.getuid())')
[[ "$uid" == 10001 ]] || die "$image ran as uid $uid, expected 10001"
size=$("$docker" image inspect -f '{{.Size}}' "$image")
# Earlier builds' images (now untagged) would pile up in the cache: drop them.
"$docker" image prune --force >/dev/null
log "built $image: $got; runs as uid $uid; size $(( size / 1000000 )) MB (base $base)"
if [[ -n "$save_tar" ]]; then
  mkdir -p "$(dirname "$save_tar")"
  "$docker" save -o "$save_tar.tmp" "$image" && mv "$save_tar.tmp" "$save_tar"
  log "saved $image to $save_tar"
fi
