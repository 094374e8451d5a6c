"""The parts of a pod the in-tree plugins sign (upstream's ``framework/signers.go``).

A signature says which pods the scheduler may treat alike (framework/batch.py): two pods
whose signatures are equal must pass the same Filters and get the same scores on the same
nodes. The keys are upstream's signer names. The values are our own records, compared with
``==``; where upstream canonicalises (sorted tolerations, sorted host ports, sorted node
affinity terms), we keep the pod's order or compare more of each item, which can only make
fewer pods alike, never more:

- resources: the requests upstream signs, plus the non-zero requests that scoring reads
  (two pods without requests but with a different number of containers score apart);
- host ports: (ip, protocol, port), not the port numbers alone;
- volumes: what the volume plugins read (claims, inline disks that conflict, migrated
  in-tree volumes), with a generic ephemeral volume's claim named by its volume (upstream
  signs the whole volume source, ConfigMaps and Secrets left out, so two replicas of a
  template are alike in both).
"""

from __future__ import annotations

from scheduler.types import PodInfo

__all__ = [
    "FEATURES",
    "HOST_PORTS",
    "IMAGE_NAMES",
    "LABELS",
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_SELECTOR",
    "RESOURCES",
    "SCHEDULER_NAME",
    "TOLERATIONS",
    "VOLUMES",
    "host_ports",
    "node_affinity",
    "resources",
    "tolerations",
    "volumes",
]

IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def resources(pod: PodInfo) -> object:
    r = pod.requests
    return (
        r.milli_cpu,
        r.memory,
        r.ephemeral_storage,
        r.allowed_pod_number,
        tuple(sorted(r.scalar.items())),
        pod.non_zero_milli_cpu,
        pod.non_zero_memory,
    )


def tolerations(pod: PodInfo) -> object:
    return pod.tolerations


def host_ports(pod: PodInfo) -> object:
    return tuple(sorted({(p.ip, p.protocol, p.port) for p in pod.host_ports}))


def node_affinity(pod: PodInfo) -> object:
    return (pod.required_node_affinity, pod.preferred_node_affinity)


# The last pod whose volumes were signed and their value: four plugins sign them, one
# after another, for each pod (the scheduler's single thread).
_last_volumes: list[object] = [None, None]


def volumes(pod: PodInfo) -> object:
    if _last_volumes[0] is pod:
        return _last_volumes[1]
    if pod.claims:
        prefix = pod.name + "-"
        claims: tuple[tuple[str, str], ...] = tuple(
            ("ephemeral", name.removeprefix(prefix)) if owned else ("claim", name)
            for name, owned in pod.claims
        )
    else:
        claims = ()
    value = (claims, pod.disks, pod.migrated)
    _last_volumes[0], _last_volumes[1] = pod, value
    return value
