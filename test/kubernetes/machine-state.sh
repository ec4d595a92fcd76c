#!/usr/bin/env bash
# Prints what of this machine cluster.sh up changes and down must restore:
# interfaces and addresses, routes, iptables rules (nf_tables and legacy),
# mounts, cgroups, the directories outside DIR that containerd, the CNI
# plugins and the kubelet use, and the cluster's kinds of processes. To
# check that down leaves nothing behind:
#
#   test/kubernetes/machine-state.sh >/tmp/before
#   test/kubernetes/cluster.sh up /tmp/k8s && test/kubernetes/cluster.sh down /tmp/k8s
#   test/kubernetes/machine-state.sh | diff /tmp/before -
#
# (Docker or other programs running meanwhile may change some of it too.)
set -uo pipefail
counters='s/\[[0-9]*:[0-9]*\]//'
echo "== links"
ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
echo "== addresses"
ip -o addr show | awk '{print $2, $4}' | sort
echo "== routes"
ip route show table all | grep -v '^local\|^broadcast\|fe80\|^multicast' | sort
for cmd in iptables ip6tables iptables-legacy ip6tables-legacy; do
  command -v "$cmd-save" >/dev/null || continue
  echo "== $cmd"
  "$cmd-save" 2>/dev/null | grep -v '^#' | sed "$counters"
done
if command -v nft >/dev/null; then
  echo "== nft tables"
  nft list tables 2>/dev/null | sort
fi
echo "== mounts"
awk '{print $5, $9}' /proc/self/mountinfo | sort
echo "== cgroups"
find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -name 'kubepods*' | sort
echo "== directories"
for d in /run/containerd /var/run/netns /var/lib/cni /etc/cni /opt/cni /var/log/containers /var/log/pods /var/lib/kubelet; do
  [ -e "$d" ] && find "$d" -maxdepth 2 | sort
done
echo "== processes"
ps --ppid 2 -p 2 --deselect -o stat=,comm= | awk '$1 !~ /^Z/ {print $2}' |
  grep -E '^(containerd|etcd|kube|pause|runc)' | sort | uniq -c
exit 0
