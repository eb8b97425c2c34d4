# SPDX-License-Identifier: Apache-2.0
"""xpud's configuration file, /etc/xpu/xpud.toml (docs/xpud.md).

    [defaults]              # every GPU not named in a [[gpu]] table
    mode = "shared"         # shared | exclusive
    policy = "weighted"     # fixed | weighted | priority | native
    period_ms = 20          # 1 to 1000

    [[gpu]]
    gpu = 0                 # index, or "GPU-..." UUID
    mode = "exclusive"
    policy = "fixed"

    [[slice]]               # a slice to create at boot
    name = "train"
    gpu = "GPU-8f2c...."
    memory = "8GiB"
    compute = "25%"         # optional, 0.1 % steps; default 0
    weight = 100            # optional, 1 to 10000
    priority = "normal"     # optional, low | normal | high
    host_memory = "16GiB"   # optional: bound on the system memory the
                            # driver allocates for it; default 0: none

    [metrics]               # the Prometheus endpoint, /metrics
    enabled = true          # false: no endpoint
    listen = "127.0.0.1:9400"   # IP:PORT, [IPv6]:PORT
    [cdi]                   # the CDI spec for container runtimes (xpu/cdi)
    vendor = "xpu.dev"      # the kind is VENDOR/slice
    spec_dir = "/var/run/cdi"   # "" writes none
    hook = ""               # xpu-cdi-hook's path; "": beside xpud
    nvidia_spec = ""        # NVIDIA's spec to take libraries from; "":
                            # /var/run/cdi, then /etc/cdi; "none": none

    [container_runtime]     # xpu-container-runtime (reads this file too)
    oci_runtime = ""        # "": crun if found, else runc
    socket = "/run/xpu/xpud.sock"
    host_memory = "0"       # the bound on system memory of the slices it
                            # makes, and the most XPU_HOST_MEMORY may ask;
                            # "0" (the default): none
    kubernetes = false      # true: every container is a Kubernetes pod's
                            # (a slice only from its devices); false: those
                            # whose CRI annotations say so
    pod_resources = "/var/lib/kubelet/pod-resources/kubelet.sock"
                            # kubelet's pod resources API, which says which
                            # slice a pod's container was given

Every error names the file, the line and the field: ``PATH:LINE: FIELD: what
is wrong``.  Unknown tables and keys are errors too, so that a misspelt key
is not silently ignored.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import model, sizes
from .errors import ConfigError

# tomllib is in the standard library from 3.11; xpud supports 3.9.
if sys.version_info >= (3, 11):  # noqa: UP036
    import tomllib
else:
    import tomli as tomllib

DEFAULT_PATH = "/etc/xpu/xpud.toml"

_SETTINGS_KEYS = ("mode", "policy", "period_ms")
_GPU_KEYS = ("gpu",) + _SETTINGS_KEYS
_SLICE_KEYS = ("name", "gpu", "memory", "compute", "weight", "priority",
               "host_memory")
_METRICS_KEYS = ("enabled", "listen")

DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 9400
_CDI_KEYS = ("vendor", "spec_dir", "hook", "nvidia_spec")
_RUNTIME_KEYS = ("oci_runtime", "socket", "host_memory", "kubernetes",
                 "pod_resources")
_TOP_KEYS = ("defaults", "gpu", "slice", "metrics", "cdi",
             "container_runtime")

DEFAULT_CDI_VENDOR = "xpu.dev"
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"
DEFAULT_SOCKET = "/run/xpu/xpud.sock"  # as api.DEFAULT_SOCKET
# kubelet's pod resources socket (as xpu.k8s.kubelet.POD_RESOURCES_SOCKET)
DEFAULT_POD_RESOURCES = "/var/lib/kubelet/pod-resources/kubelet.sock"
# The longest path a UNIX socket's address holds (sun_path, less its NUL).
_SOCKET_PATH_MAX = 107
# A CDI vendor name (the CDI library's rule): a letter first, a letter or
# digit last, letters, digits, '_', '-' and '.' between.
_CDI_VENDOR_RE = re.compile(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class GpuConfig:
    """The settings of one GPU named in a [[gpu]] table."""

    gpu: model.GpuRef
    settings: model.GpuSettings
    where: str


@dataclass(frozen=True)
class SliceConfig:
    """A [[slice]] table: a slice to create at boot.  gpu is unresolved
    (a UUID or an index); where is PATH:LINE of its table."""

    name: str
    gpu: model.GpuRef
    memory_limit_bytes: int
    compute_share: int = model.DEFAULT_COMPUTE_SHARE
    weight: int = model.DEFAULT_WEIGHT
    priority: str = model.DEFAULT_PRIORITY
    where: str = ""
    host_memory_limit_bytes: int = model.NO_HOST_MEMORY_LIMIT


@dataclass(frozen=True)
class MetricsConfig:
    """[metrics]: xpud's Prometheus endpoint (xpu/metrics/).  host is an
    IP address (IPv6 without brackets), port 1 to 65535."""

    enabled: bool = True
    host: str = DEFAULT_METRICS_HOST
    port: int = DEFAULT_METRICS_PORT

    @property
    def listen(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class CdiConfig:
    """The [cdi] table: the CDI spec xpud writes (docs/containers.md).
    spec_dir "" writes none; hook "" finds xpu-cdi-hook beside xpud;
    nvidia_spec "" looks for NVIDIA's spec in the standard directories,
    "none" takes none."""

    vendor: str = DEFAULT_CDI_VENDOR
    spec_dir: str = DEFAULT_CDI_SPEC_DIR
    hook: str = ""
    nvidia_spec: str = ""


@dataclass(frozen=True)
class RuntimeConfig:
    """The [container_runtime] table, read by xpu-container-runtime:
    oci_runtime "" is crun when found, else runc; host_memory_limit_bytes
    the host bound of the slices it makes (0: none); kubernetes True holds
    every container to what a Kubernetes pod may ask (a slice only from
    the devices kubelet gave it), False only those whose CRI annotations
    say they are a pod's; pod_resources is kubelet's pod resources socket,
    asked which slice a pod's container holds when no CDI device says."""

    oci_runtime: str = ""
    socket: str = DEFAULT_SOCKET
    host_memory_limit_bytes: int = model.NO_HOST_MEMORY_LIMIT
    kubernetes: bool = False
    pod_resources: str = DEFAULT_POD_RESOURCES


@dataclass(frozen=True)
class Config:
    path: str = DEFAULT_PATH
    defaults: model.GpuSettings = field(default_factory=model.GpuSettings)
    gpus: tuple[GpuConfig, ...] = ()
    slices: tuple[SliceConfig, ...] = ()
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    cdi: CdiConfig = field(default_factory=CdiConfig)
    container_runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    def settings_for(self, gpu: model.Gpu) -> model.GpuSettings:
        for g in self.gpus:
            if g.gpu == gpu.index or g.gpu == gpu.uuid:
                return g.settings
        return self.defaults


class _KeyLines:
    """The line of each table header and key in a TOML text.

    TOML parsers report line numbers only for syntax errors; the parsed
    document has none.  So, to name the line of a field, the text is scanned
    here for table headers ([t], [[t]]) and `key =` lines.  This covers the
    file as docs/xpud.md writes it; for other spellings (inline tables,
    dotted keys across tables) it falls back to the line of the enclosing
    table or of the top-level key, and at worst to no line."""

    _HEADER = re.compile(r"\s*(\[\[?)\s*([^\]#]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"""\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)"""
                      r"""(\s*\.\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*\s*=""")

    def __init__(self, text: str):
        # sections: [(table name, line of header)]; keys: per section,
        # {first key component: line}.  Section 0 is the top level.
        self.sections: list[tuple[str, int]] = [("", 0)]
        self.keys: list[dict[str, int]] = [{}]
        in_multiline = None
        for lineno, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            m = self._HEADER.match(line)
            if m:
                name = ".".join(p.strip().strip("\"'")
                                for p in m.group(2).split("."))
                self.sections.append((name, lineno))
                self.keys.append({})
                continue
            m = self._KEY.match(line)
            if m:
                self.keys[-1].setdefault(m.group(1).strip("\"'"), lineno)
            for quote in ('"""', "'''"):
                if line.count(quote) % 2 == 1:
                    in_multiline = quote
                    break

    def line(self, table: str, index: int | None = None,
             key: str | None = None) -> int | None:
        """The line of KEY in the INDEXth [[TABLE]] (or in [TABLE] when
        INDEX is None, or at the top level when TABLE is ''), else of that
        table's header, else of TABLE as a top-level key."""
        if table == "":
            if key is None:
                return None
            if key in self.keys[0]:
                return self.keys[0][key]
            return self.line(key)
        seen = -1
        for i, (name, lineno) in enumerate(self.sections):
            if name != table:
                continue
            seen += 1
            if index is not None and seen != index:
                continue
            if key is not None and key in self.keys[i]:
                return self.keys[i][key]
            return lineno or None
        return self.keys[0].get(table)


class _Checker:
    """Turns a parsed document into a Config, raising ConfigError at the
    first wrong field with PATH:LINE: FIELD: in front of the message."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = _KeyLines(text)

    def where(self, table: str, index: int | None = None,
              key: str | None = None) -> str:
        line = self.lines.line(table, index, key)
        return f"{self.path}:{line}" if line else self.path

    def fail(self, label: str, message: str, table: str,
             index: int | None = None, key: str | None = None) -> ConfigError:
        return ConfigError(
            f"{self.where(table, index, key)}: {label}: {message}")

    def table(self, doc: dict, name: str, label: str, index, allowed):
        if not isinstance(doc, dict):
            raise self.fail(label, "must be a table", name, index)
        for key in doc:
            if key not in allowed:
                raise self.fail(
                    f"{label}.{key}" if label else key,
                    "unknown key (known: " + ", ".join(allowed) + ")",
                    name, index, key)
        return doc

    def value(self, doc, table, index, label, key, check, default=None,
              required=False):
        full = f"{label}.{key}" if label else key
        if key not in doc:
            if required:
                raise self.fail(full, "missing", table, index)
            return default
        try:
            return check(doc[key])
        except (TypeError, ValueError) as e:
            raise self.fail(full, str(e), table, index, key) from None

    def settings(self, doc, table, index, label,
                 base: model.GpuSettings) -> model.GpuSettings:
        return model.GpuSettings(
            mode=self.value(doc, table, index, label, "mode",
                            lambda v: model.check_choice(v, model.MODES),
                            base.mode),
            policy=self.value(doc, table, index, label, "policy",
                              lambda v: model.check_choice(v, model.POLICIES),
                              base.policy),
            period_ms=self.value(doc, table, index, label, "period_ms",
                                 model.check_period_ms, base.period_ms))

    def config(self, doc: dict) -> Config:
        self.table(doc, "", "", None, _TOP_KEYS)
        defaults = model.GpuSettings()
        if "defaults" in doc:
            d = self.table(doc["defaults"], "defaults", "defaults", None,
                           _SETTINGS_KEYS)
            defaults = self.settings(d, "defaults", None, "defaults",
                                     defaults)
        gpus = []
        for i, g in enumerate(self.array(doc, "gpu")):
            label = f"gpu[{i}]"
            self.table(g, "gpu", label, i, _GPU_KEYS)
            ref = self.value(g, "gpu", i, label, "gpu", model.parse_gpu_ref,
                             required=True)
            for other in gpus:
                if other.gpu == ref:
                    raise self.fail(f"{label}.gpu",
                                    f"GPU {ref} is already configured at "
                                    f"{other.where}", "gpu", i, "gpu")
            gpus.append(GpuConfig(ref, self.settings(g, "gpu", i, label,
                                                     defaults),
                                  self.where("gpu", i)))
        slices = []
        for i, s in enumerate(self.array(doc, "slice")):
            slices.append(self.slice(s, i, slices))
        metrics = MetricsConfig()
        if "metrics" in doc:
            m = self.table(doc["metrics"], "metrics", "metrics", None,
                           _METRICS_KEYS)
            host, port = self.value(m, "metrics", None, "metrics", "listen",
                                    parse_listen,
                                    (metrics.host, metrics.port))
            metrics = MetricsConfig(
                self.value(m, "metrics", None, "metrics", "enabled",
                           _bool, True), host, port)
        return Config(self.path, defaults, tuple(gpus), tuple(slices),
                      metrics, self.cdi(doc.get("cdi", {})),
                      self.container_runtime(doc.get("container_runtime",
                                                     {})))

    def cdi(self, doc) -> CdiConfig:
        self.table(doc, "cdi", "cdi", None, _CDI_KEYS)
        base = CdiConfig()

        def get(key, check):
            return self.value(doc, "cdi", None, "cdi", key, check,
                              getattr(base, key))

        return CdiConfig(
            vendor=get("vendor", _cdi_vendor),
            spec_dir=get("spec_dir", lambda v: _path(v, empty_ok=True)),
            hook=get("hook", lambda v: _path(v, empty_ok=True)),
            nvidia_spec=get("nvidia_spec", _nvidia_spec))

    def container_runtime(self, doc) -> RuntimeConfig:
        self.table(doc, "container_runtime", "container_runtime", None,
                   _RUNTIME_KEYS)
        base = RuntimeConfig()

        def get(key, check):
            return self.value(doc, "container_runtime", None,
                              "container_runtime", key, check,
                              getattr(base, key))

        return RuntimeConfig(
            oci_runtime=get("oci_runtime", _program),
            socket=get("socket", lambda v: _path(v, empty_ok=False)),
            host_memory_limit_bytes=self.value(
                doc, "container_runtime", None, "container_runtime",
                "host_memory", lambda v: model.check_host_memory(_size(v)),
                base.host_memory_limit_bytes),
            kubernetes=get("kubernetes", _bool),
            pod_resources=get("pod_resources", _socket_path))

    def array(self, doc: dict, name: str) -> list:
        value = doc.get(name, [])
        if not isinstance(value, list):
            raise self.fail(name, f"must be an array of tables: write "
                            f"[[{name}]]", name)
        return value

    def slice(self, s, i: int, earlier: list[SliceConfig]) -> SliceConfig:
        label = f"slice[{i}]"
        self.table(s, "slice", label, i, _SLICE_KEYS)
        name = self.value(s, "slice", i, label, "name", model.check_name,
                          required=True)
        for other in earlier:
            if other.name == name:
                raise self.fail(f"{label}.name",
                                f"slice '{name}' is already defined at "
                                f"{other.where}", "slice", i, "name")
        return SliceConfig(
            name=name,
            gpu=self.value(s, "slice", i, label, "gpu", model.parse_gpu_ref,
                           required=True),
            memory_limit_bytes=self.value(
                s, "slice", i, label, "memory",
                lambda v: model.check_memory(_size(v)), required=True),
            compute_share=self.value(s, "slice", i, label, "compute",
                                     sizes.parse_share,
                                     model.DEFAULT_COMPUTE_SHARE),
            weight=self.value(s, "slice", i, label, "weight",
                              model.check_weight, model.DEFAULT_WEIGHT),
            priority=self.value(
                s, "slice", i, label, "priority",
                lambda v: model.check_choice(v, model.PRIORITIES),
                model.DEFAULT_PRIORITY),
            where=self.where("slice", i),
            host_memory_limit_bytes=self.value(
                s, "slice", i, label, "host_memory",
                lambda v: model.check_host_memory(_size(v)),
                model.NO_HOST_MEMORY_LIMIT))


def _size(value: object) -> int:
    if not isinstance(value, (str, int)):
        raise TypeError(f"{value!r} is not a size: write a string such as "
                        "\"8GiB\", or a whole number of bytes")
    return sizes.parse_size(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{value!r} is not true or false")
    return value


def parse_listen(value: object) -> tuple[str, int]:
    """"IP:PORT" or "[IPv6]:PORT" as (IP, PORT).  Only addresses: a host
    name would be resolved at each start, to whatever it means then."""
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not an address: write a string such "
                        "as \"127.0.0.1:9400\"")
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"'{value}' is not IP:PORT: write 127.0.0.1:9400, "
                         "[::1]:9400, or 0.0.0.0:9400 for every address")
    if host.startswith("[") and host.endswith("]"):
        host, want = host[1:-1], ipaddress.IPv6Address
    elif ":" in host:
        raise ValueError(f"'{value}': write an IPv6 address in brackets, "
                         "as [::1]:9400")
    else:
        want = ipaddress.IPv4Address
    try:
        ip = want(host)
    except ValueError:
        raise ValueError(f"'{value}': '{host}' is not an IP address: write "
                         "127.0.0.1, [::1], or 0.0.0.0 for every "
                         "address") from None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"'{value}': the port '{port}' is not a number "
                         "from 1 to 65535")
    return str(ip), int(port)
def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string: write it in quotes")
    return value


def _path(value: object, empty_ok: bool) -> str:
    text = _string(value)
    if text == "" and empty_ok:
        return text
    if not text.startswith("/"):
        raise ValueError(f"'{text}' is not an absolute path")
    return text


def _socket_path(value: object) -> str:
    """A UNIX socket's absolute path, short enough for its address."""
    text = _path(value, empty_ok=False)
    n = len(text.encode())
    if n > _SOCKET_PATH_MAX:
        raise ValueError(f"'{text}' is {n} bytes long, longer than a UNIX "
                         f"socket's path may be ({_SOCKET_PATH_MAX})")
    return text


def _cdi_vendor(value: object) -> str:
    text = _string(value)
    if not _CDI_VENDOR_RE.fullmatch(text):
        raise ValueError(
            f"'{text}' is not a CDI vendor name: a letter first, a letter or "
            "digit last, and letters, digits, '_', '-' or '.' between (a "
            "domain such as xpu.dev)")
    return text


def _nvidia_spec(value: object) -> str:
    text = _string(value)
    if text in ("", "none"):
        return text
    return _path(text, empty_ok=False)


def _program(value: object) -> str:
    """A program's name (looked up in PATH) or absolute path; "" for the
    default."""
    text = _string(value)
    if text == "" or text.startswith("/") or re.fullmatch(
            r"[A-Za-z0-9_.+-]+", text):
        return text
    raise ValueError(f"'{text}' is neither a program's name nor an absolute "
                     "path")


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)")


def parse(text: str, path: str = DEFAULT_PATH) -> Config:
    """The Config TEXT describes; PATH is only named in errors."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        if m:
            msg = msg[:m.start()] + msg[m.end():]
            raise ConfigError(f"{path}:{m.group(1)}:{m.group(2)}: "
                              f"TOML syntax: {msg}") from None
        raise ConfigError(f"{path}: TOML syntax: {msg}") from None
    return _Checker(path, text).config(doc)


def load(path: str = DEFAULT_PATH, missing_ok: bool = False) -> Config:
    """Read and check the configuration at PATH.  A missing file is the
    empty configuration (all defaults, no slices) when MISSING_OK."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return Config(path)
        raise ConfigError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte "
                          f"{e.start})") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    return parse(text, path)
