# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes validated offline: every object against the OpenAPI
schemas kubernetes-validate ships (strict: unknown fields are errors) for
the oldest and newest Kubernetes xpu supports there; the scheduler's
configuration against the extender fields of kube-scheduler's config/v1;
the commands against xpu-k8s's own parser; the names against the code's."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from xpu.k8s import dra, main, resources

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"
VERSIONS = ("1.34.0", "1.37.0")
NAMES = resources.Names()
# kube-scheduler's Extender (k8s.io/kube-scheduler/config/v1), JSON names.
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb",
                   "weight", "bindVerb", "enableHTTPS", "tlsConfig",
                   "httpTimeout", "nodeCacheCapable", "managedResources",
                   "ignorable"}
# Its ExtenderTLSConfig.
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile",
              "certData", "keyData", "caData"}


def objects():
    out = []
    for f in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.append((f.name, doc))
    return out


def by_kind(kind):
    return [d for _, d in objects() if d["kind"] == kind]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates(version):
    objs = objects()
    assert len(objs) >= 12
    for name, doc in objs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name}: {doc['kind']} {doc['metadata']['name']}: "
                        f"{e.message} at {list(e.path)}")


def test_validation_catches_mistakes():
    ds = copy.deepcopy(by_kind("DaemonSet")[0])
    ds["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[0], strict=True)
    dc = copy.deepcopy(by_kind("DeviceClass")[0])
    dc["spec"]["selectors"] = "all"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dc, VERSIONS[0], strict=True)


def test_scheduler_config():
    [cm] = by_kind("ConfigMap")
    cfg = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    [ext] = cfg["extenders"]
    assert set(ext) <= EXTENDER_FIELDS, set(ext) - EXTENDER_FIELDS
    assert ext["nodeCacheCapable"] is True
    assert [m["name"] for m in ext["managedResources"]] == [NAMES.memory,
                                                           NAMES.shares]
    # The verbs are the extender's; the URL is its Service.
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == (
        "filter", "prioritize", "bind")
    [svc] = by_kind("Service")
    assert ext["urlPrefix"] == (
        f"https://{svc['metadata']['name']}.{svc['metadata']['namespace']}"
        f".svc:{svc['spec']['ports'][0]['port']}")
    # Mutual TLS: a client certificate and key, and the CA that checks the
    # extender's (without caFile kube-scheduler checks nothing).
    assert ext["enableHTTPS"] is True
    tls = ext["tlsConfig"]
    assert set(tls) <= TLS_FIELDS, set(tls) - TLS_FIELDS
    assert not tls.get("insecure")
    for f in ("cert", "key", "ca"):
        assert tls.get(f"{f}File") or tls.get(f"{f}Data"), f


def test_device_classes():
    classes = {d["metadata"]["name"]: d for d in by_kind("DeviceClass")}
    assert set(classes) == {"gpu.xpu.dev", "xpu-shares.xpu.dev"}
    for d in classes.values():
        [sel] = d["spec"]["selectors"]
        assert sel["cel"]["expression"] == (
            f'device.driver == "{resources.DEFAULT_DRIVER}"')
    assert classes["xpu-shares.xpu.dev"]["spec"]["extendedResourceName"] \
        == NAMES.shares


def test_commands_parse():
    parser = main.build_parser()
    for kind in ("DaemonSet", "Deployment"):
        [obj] = by_kind(kind)
        [c] = obj["spec"]["template"]["spec"]["containers"]
        assert c["command"][0] == "xpu-k8s"
        args = parser.parse_args(c["command"][1:])
        assert args.command == {"DaemonSet": "node",
                                "Deployment": "extender"}[kind]
    ds = by_kind("DaemonSet")[0]["spec"]["template"]["spec"]
    mounts = {m["mountPath"] for m in ds["containers"][0]["volumeMounts"]}
    assert {"/run/xpu", "/var/lib/kubelet/device-plugins",
            "/var/lib/kubelet/pod-resources", "/var/lib/kubelet/plugins",
            "/var/lib/kubelet/plugins_registry"} <= mounts


def test_extender_serves_mutual_tls_from_its_secret():
    """The Deployment's extender is given its certificate, key and client
    CA from Secret xpu-extender-tls (the keys docs/kubernetes.md makes), not
    --insecure-no-client-auth; it listens where the Service and the probe
    point."""
    [dep] = by_kind("Deployment")
    pod = dep["spec"]["template"]["spec"]
    [c] = pod["containers"]
    args = main.build_parser().parse_args(c["command"][1:])
    assert not args.insecure_no_client_auth
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"]
               if "secret" in v}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    files = {}
    for opt, key in (("tls_cert", "tls.crt"), ("tls_key", "tls.key"),
                     ("client_ca", "ca.crt")):
        path = Path(getattr(args, opt))
        assert path.name == key, (opt, path)
        files[opt] = secrets[mounts[str(path.parent)]]
    assert set(files.values()) == {"xpu-extender-tls"}
    port = args.listen[1]
    assert c["readinessProbe"]["tcpSocket"]["port"] == port
    assert [p["containerPort"] for p in c["ports"]] == [port]
    [svc] = by_kind("Service")
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == [port]


def test_opaque_configs_are_the_drivers():
    """Each opaque config of xpu.dev in the manifests is one Prepare
    accepts (a SliceConfig, in the schema dra.slice_config reads)."""
    configs = []
    for _, d in objects():
        spec = d.get("spec", {})
        spec = spec.get("spec", spec)  # a ResourceClaimTemplate's
        configs += (spec.get("devices") or {}).get("config") or []
        configs += spec.get("config") or []  # a DeviceClass's
    ours = [c["opaque"]["parameters"] for c in configs
            if c["opaque"]["driver"] == resources.DEFAULT_DRIVER]
    assert ours
    for p in ours:
        assert dra.slice_config(p, resources.DEFAULT_DRIVER) == 8 << 30
