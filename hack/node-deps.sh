#!/usr/bin/env bash
# Install what the real node of the local control plane needs from Debian's packages
# (containerd, runc, the CNI plugins, iptables, iproute2), saying so; a no-op when present.
# Root and apt-get are needed; on failure the last line says what to install by hand.
set -euo pipefail

need=()
command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
  need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
[[ ${#need[@]} -eq 0 ]] && exit 0

fail() { printf '[node-deps] ERROR: %s\n' "$*" >&2; exit 1; }
[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 ||
  fail "missing ${need[*]}: install them (Debian: apt-get install ${need[*]}) as root"
echo "[node-deps] installing ${need[*]} with apt-get (Debian's packages)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
  { apt-get update >&2 && apt-get install -y --no-install-recommends "${need[@]}" >&2; } ||
  fail "apt-get install ${need[*]} failed: install them by hand as root"
