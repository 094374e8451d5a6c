"""In-tree volume plugins migrated to CSI drivers, as much as the scheduler needs of them
(as k8s.io/csi-translation-lib v0.37 does it): which volume sources are migratable, the CSI
driver each one migrates to, and the volume handle a migrated volume translates to.

NodeVolumeLimits counts a migrated volume against its CSI driver's attach limit under that
handle, so two pods that use one disk count it once. A source whose translation fails
(an AWS volume ID in neither known form, an Azure disk that is not ``Managed``, GCE zones
in more than one region) keeps the error, which the plugin reports as upstream's does."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CSI_DRIVERS",
    "MIGRATION_ON",
    "TOPOLOGY_KEYS",
    "Translated",
    "migratable",
    "translate",
]

AWS_EBS = "kubernetes.io/aws-ebs"
GCE_PD = "kubernetes.io/gce-pd"
AZURE_DISK = "kubernetes.io/azure-disk"
AZURE_FILE = "kubernetes.io/azure-file"
CINDER = "kubernetes.io/cinder"
VSPHERE = "kubernetes.io/vsphere-volume"
PORTWORX = "kubernetes.io/portworx-volume"

# In-tree plugin name -> the CSI driver it migrated to.
CSI_DRIVERS = {
    AWS_EBS: "ebs.csi.aws.com",
    GCE_PD: "pd.csi.storage.gke.io",
    AZURE_DISK: "disk.csi.azure.com",
    AZURE_FILE: "file.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
    VSPHERE: "csi.vsphere.vmware.com",
    PORTWORX: "pxd.portworx.com",
}
# The topology key each driver's nodes carry their zone under, for the plugins whose
# PersistentVolumes' zone terms csi-translation-lib rewrites (translateTopologyFromInTreeToCSI).
TOPOLOGY_KEYS = {
    AWS_EBS: "topology.ebs.csi.aws.com/zone",
    GCE_PD: "topology.gke.io/zone",
    CINDER: "topology.cinder.csi.openstack.org/zone",
}
# The plugins whose migrated volumes NodeVolumeLimits counts (upstream's isCSIMigrationOn,
# which leaves out Azure File and vSphere), and whose bound volumes VolumeBinding
# translates on nodes whose CSINode says they migrated the plugin.
MIGRATION_ON = frozenset((AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX))
# A volume source's field -> its in-tree plugin.
_SOURCES = (
    ("awsElasticBlockStore", AWS_EBS),
    ("gcePersistentDisk", GCE_PD),
    ("azureDisk", AZURE_DISK),
    ("azureFile", AZURE_FILE),
    ("cinder", CINDER),
    ("vsphereVolume", VSPHERE),
    ("portworxVolume", PORTWORX),
)
_AWS_VOLUME = re.compile(r"^vol-[^/]*$")
_UNSPECIFIED = "UNSPECIFIED"
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_GA_ZONE = "topology.kubernetes.io/zone"


class TranslationError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Translated:
    """A migratable in-tree volume: its plugin, the CSI driver, and the volume handle it
    translates to ("" with ``error`` set when it does not translate)."""

    plugin: str
    handle: str
    error: str = ""

    @property
    def driver(self) -> str:
        return CSI_DRIVERS[self.plugin]


def _ebs_volume_id(kubernetes_id: str) -> str:
    """``aws://<zone>/vol-...`` or a bare ``vol-...`` -> ``vol-...``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id  # a bare volume ID, as upstream assumes
    try:
        path = urlsplit(kubernetes_id).path
    except ValueError as e:
        raise TranslationError(f"Invalid disk name ({kubernetes_id}): {e}") from e
    aws_id = path.strip("/")
    if not _AWS_VOLUME.match(aws_id):
        raise TranslationError(f"Invalid format for AWS volume ({kubernetes_id})")
    return aws_id


def _gce_region(zones: list[str]) -> str:
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                "zone in unexpected format, expected: {locale}-{region}-{zone}, got: " + zone
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        listed = " ".join(f"{r}:{{}}" for r in sorted(regions))  # Go's %v of a set
        raise TranslationError(f"multiple or no regions gotten from zones, got: map[{listed}]")
    return regions.pop()


def _handle(plugin: str, src: Mapping[str, Any], labels: Mapping[str, str] | None) -> str:
    """The volume handle of one source (``labels``: a PersistentVolume's; None inline)."""
    if plugin == AWS_EBS:
        try:
            return _ebs_volume_id(str(src.get("volumeID") or ""))
        except TranslationError as e:
            raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID {e}") from e
    if plugin == GCE_PD:
        pd = str(src.get("pdName") or "")
        zones_label = ""
        if labels is not None:
            zones_label = labels.get(_BETA_ZONE) or labels.get(_GA_ZONE) or ""
        zones = zones_label.split("__")
        if len(zones) == 1 and zones[0]:
            return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pd}"
        if len(zones) > 1:
            try:
                region = _gce_region(zones)
            except TranslationError as e:
                raise TranslationError(f"failed to get region from zones: {e}") from e
            return f"projects/{_UNSPECIFIED}/regions/{region}/disks/{pd}"
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd}"
    if plugin == AZURE_DISK:
        kind = src.get("kind")
        if kind is not None and str(kind).lower() != "managed":
            raise TranslationError(f"kind({kind}) is not supported in csi migration")
        return str(src.get("diskURI") or "")
    if plugin in (CINDER, PORTWORX):
        return str(src.get("volumeID") or "")
    # Azure File and vSphere: migratable, but their volumes are never counted
    # (MIGRATION_ON), so their handles are never read.
    return ""


def migratable(source: Mapping[str, Any]) -> tuple[str, str] | None:
    """A pod's volume or a PersistentVolume's spec: (the field, the in-tree plugin) of its
    migratable in-tree source, None if it has none."""
    for key, plugin in _SOURCES:
        if source.get(key) is not None:
            return key, plugin
    return None


def translate(plugin: str, src: Mapping[str, Any], labels: Mapping[str, str] | None) -> Translated:
    """One source of ``plugin`` (``labels``: a PersistentVolume's; None for a pod's inline
    volume)."""
    try:
        return Translated(plugin, _handle(plugin, src, labels))
    except TranslationError as e:
        return Translated(plugin, "", str(e))
