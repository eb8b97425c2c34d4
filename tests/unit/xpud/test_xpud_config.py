# SPDX-License-Identifier: Apache-2.0
"""xpu/config.py: /etc/xpu/xpud.toml, and errors that name file:line: field.
"""

import re
from pathlib import Path

import pytest
from xpu import config, model
from xpu.errors import ConfigError
from xpu.sizes import GIB, MIB

TOP = Path(__file__).resolve().parents[3]

EXAMPLE = """\
# xpud's configuration
[defaults]
mode = "shared"
policy = "weighted"
period_ms = 20

[[gpu]]
gpu = 1
mode = "exclusive"
policy = "fixed"
period_ms = 50

[[slice]]
name = "train"
gpu = "GPU-00000000-1111-2222-3333-444444444444"
memory = "8GiB"
compute = "25%"
weight = 200
priority = "high"

[[slice]]
name = "infer"
gpu = 1
memory = 536870912
compute = 12.5
"""

WITH_METRICS = EXAMPLE + """
[metrics]
enabled = true
listen = "127.0.0.1:9400"
"""


def test_the_example():
    cfg = config.parse(EXAMPLE, "/etc/xpu/xpud.toml")
    assert cfg.defaults == model.GpuSettings("shared", "weighted", 20)
    assert cfg.gpus == (config.GpuConfig(
        1, model.GpuSettings("exclusive", "fixed", 50),
        "/etc/xpu/xpud.toml:7"),)
    train, infer = cfg.slices
    assert train == config.SliceConfig(
        "train", "GPU-00000000-1111-2222-3333-444444444444", 8 * GIB, 250,
        200, "high", "/etc/xpu/xpud.toml:13")
    assert infer == config.SliceConfig("infer", 1, 512 * MIB, 125,
                                       model.DEFAULT_WEIGHT, "normal",
                                       "/etc/xpu/xpud.toml:21")
    assert cfg.metrics == config.MetricsConfig()
    cfg = config.parse(WITH_METRICS, "/etc/xpu/xpud.toml")
    assert cfg.metrics == config.MetricsConfig(True, "127.0.0.1", 9400)


@pytest.mark.parametrize("table, want", [
    ("", config.MetricsConfig(True, "127.0.0.1", 9400)),
    ("[metrics]\nenabled = false\n",
     config.MetricsConfig(False, "127.0.0.1", 9400)),
    ('[metrics]\nlisten = "0.0.0.0:9500"\n',
     config.MetricsConfig(True, "0.0.0.0", 9500)),
    ('[metrics]\nlisten = "[::]:9400"\n',
     config.MetricsConfig(True, "::", 9400)),
    ('[metrics]\nlisten = "[0:0::1]:1"\n',
     config.MetricsConfig(True, "::1", 1)),
])
def test_metrics(table, want):
    cfg = config.parse(table)
    assert cfg.metrics == want
    assert config.parse(f'[metrics]\nlisten = "{want.listen}"\n').metrics \
        == config.MetricsConfig(True, want.host, want.port)


def test_the_example_in_the_docs_is_valid():
    text = (TOP / "docs" / "xpud.md").read_text()
    m = re.search(r"```toml\n(.*?)```", text, re.DOTALL)
    assert m, "docs/xpud.md has no ```toml example"
    cfg = config.parse(m.group(1), "docs/xpud.md")
    assert cfg.slices


def test_the_error_shown_in_the_docs_is_the_real_one():
    text = (TOP / "docs" / "xpud.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.DOTALL).group(1)
    shown = re.search(r"^xpud: error: (/etc/xpu/xpud.toml:.*)$", text,
                      re.MULTILINE).group(1)
    with pytest.raises(ConfigError) as e:
        config.parse(example.replace('"40GiB"', '"40GB"'),
                     "/etc/xpu/xpud.toml")
    assert str(e.value) == shown


def test_host_memory():
    cfg = config.parse(EXAMPLE.replace('priority = "high"\n',
                                       'priority = "high"\n'
                                       'host_memory = "16GiB"\n'))
    train, infer = cfg.slices
    assert train.host_memory_limit_bytes == 16 * GIB
    assert infer.host_memory_limit_bytes == 0  # absent: no bound
    cfg = config.parse(EXAMPLE.replace("compute = 12.5\n",
                                       "compute = 12.5\nhost_memory = 0\n"))
    assert cfg.slices[1].host_memory_limit_bytes == 0
    cfg = config.parse(EXAMPLE.replace("compute = 12.5\n",
                                       "compute = 12.5\n"
                                       "host_memory = 1073741824\n"))
    assert cfg.slices[1].host_memory_limit_bytes == GIB


def test_settings_for_a_gpu():
    cfg = config.parse(EXAMPLE)
    g0 = model.Gpu(0, "GPU-00000000-1111-2222-3333-444444444444", "x", 0,
                   "0000:18:00.0")
    g1 = model.Gpu(1, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "x", 1,
                   "0000:19:00.0")
    assert cfg.settings_for(g0) == cfg.defaults
    assert cfg.settings_for(g1).mode == "exclusive"


def test_empty_and_missing_files_are_all_defaults(tmp_path):
    assert config.parse("") == config.Config(config.DEFAULT_PATH)
    missing = tmp_path / "none.toml"
    cfg = config.load(str(missing), missing_ok=True)
    assert cfg.slices == () and cfg.defaults == model.GpuSettings()
    with pytest.raises(ConfigError, match=f"^{missing}: no such file$"):
        config.load(str(missing))


def test_uuids_are_normalised():
    cfg = config.parse('[[slice]]\nname = "a"\n'
                       'gpu = "gpu-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"\n'
                       'memory = "1GiB"\n')
    assert cfg.slices[0].gpu == "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def _replace(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


# (edit of EXAMPLE, line, field, message)
BAD = [
    (('mode = "shared"', 'mode = "shard"'), 3, "defaults.mode",
     "'shard' is not one of shared, exclusive"),
    (('policy = "weighted"', 'policy = "fair"'), 4, "defaults.policy",
     "'fair' is not one of fixed, weighted, priority, native"),
    (("period_ms = 20", "period_ms = 0"), 5, "defaults.period_ms",
     "0 is not between 1 and 1000 ms"),
    (("period_ms = 50", "period_ms = 1001"), 11, "gpu[0].period_ms",
     "1001 is not between 1 and 1000 ms"),
    (("period_ms = 50", 'period_ms = "50ms"'), 11, "gpu[0].period_ms",
     "is not a whole number of milliseconds"),
    (("gpu = 1\nmode", "gpu = -1\nmode"), 8, "gpu[0].gpu",
     "-1 is not a GPU index"),
    (('mode = "exclusive"', 'mode = "exclusive"\nfoo = 1'), 10, "gpu[0].foo",
     "unknown key (known: gpu, mode, policy, period_ms)"),
    (('name = "train"', 'name = ".train"'), 14, "slice[0].name",
     "'.train' is not a valid slice name"),
    (('name = "train"', 'name = "-x"'), 14, "slice[0].name",
     "'-x' is not a valid slice name"),
    (('name = "train"', 'name = "a b"'), 14, "slice[0].name",
     "'a b' is not a valid slice name"),
    (('name = "train"', 'name = ""'), 14, "slice[0].name",
     "'' is not a valid slice name"),
    (('name = "train"', 'name = "a/b"'), 14, "slice[0].name",
     "'a/b' is not a valid slice name"),
    (('name = "train"', f'name = "{"x" * 32}"'), 14, "slice[0].name",
     "is not a valid slice name: use 1 to 31"),
    (('name = "train"\n', ''), 13, "slice[0].name", "missing"),
    (('gpu = "GPU-00000000-1111-2222-3333-444444444444"', 'gpu = "first"'),
     15, "slice[0].gpu", "'first' is not a GPU"),
    (('memory = "8GiB"', 'memory = "8GB"'), 16, "slice[0].memory",
     "'8GB' is ambiguous"),
    (('memory = "8GiB"', 'memory = 512'), 16, "slice[0].memory",
     "512B is below the smallest limit, 1MiB"),
    (('memory = "8GiB"', 'memory = 8.5'), 16, "slice[0].memory",
     "8.5 is not a size"),
    (('memory = "8GiB"\n', ''), 13, "slice[0].memory", "missing"),
    (('compute = "25%"', 'compute = "250%"'), 17, "slice[0].compute",
     "250% is not between 0 and 100%"),
    (("compute = 12.5", "compute = 12.55"), 25, "slice[1].compute",
     "finer than the 0.1 % steps"),
    (("weight = 200", "weight = 0"), 18, "slice[0].weight",
     "0 is not between 1 and 10000"),
    (("weight = 200", "weight = true"), 18, "slice[0].weight",
     "True is not a whole number"),
    (('priority = "high"', 'priority = "urgent"'), 19, "slice[0].priority",
     "'urgent' is not one of low, normal, high"),
    (('priority = "high"', 'priority = "high"\nmemroy = "1GiB"'), 20,
     "slice[0].memroy", "unknown key (known: name, gpu, memory, compute"),
    (('priority = "high"', 'priority = "high"\nhost_memory = "8GB"'), 20,
     "slice[0].host_memory", "'8GB' is ambiguous"),
    (('priority = "high"', 'priority = "high"\nhost_memory = 512'), 20,
     "slice[0].host_memory",
     "512B is below the smallest bound, 1MiB (0 is no bound"),
    (('priority = "high"', 'priority = "high"\nhost_memory = -1'), 20,
     "slice[0].host_memory", "-1 bytes is out of range"),
    (('priority = "high"', 'priority = "high"\nhost_memory = true'), 20,
     "slice[0].host_memory", "True is not a size"),
    (('priority = "high"', 'priority = "high"\nhost_memory = 1.5'), 20,
     "slice[0].host_memory", "1.5 is not a size"),
    (('name = "infer"', 'name = "train"'), 22, "slice[1].name",
     "slice 'train' is already defined at /etc/xpu/xpud.toml:13"),
    (("[defaults]", "[default]"), 2, "default",
     ("unknown key (known: defaults, gpu, slice, metrics, cdi, "
      "container_runtime)")),
    (("[defaults]", "debug = true\n[defaults]"), 2, "debug",
     ("unknown key (known: defaults, gpu, slice, metrics, cdi, "
      "container_runtime)")),
    (("# xpud's configuration\n", "metrics = 1\n"), 1, "metrics",
     "must be a table"),
]


BAD_METRICS = [
    (("enabled = true", 'enabled = "yes"'), 28, "metrics.enabled",
     "'yes' is not true or false"),
    (("enabled = true", "enabled = true\nport = 9400"), 29, "metrics.port",
     "unknown key (known: enabled, listen)"),
    (('listen = "127.0.0.1:9400"', "listen = 9400"), 29, "metrics.listen",
     'is not an address: write a string such as "127.0.0.1:9400"'),
    (('listen = "127.0.0.1:9400"', 'listen = "9400"'), 29, "metrics.listen",
     ("'9400' is not IP:PORT: write 127.0.0.1:9400, [::1]:9400, or "
      "0.0.0.0:9400 for every address")),
    (('listen = "127.0.0.1:9400"', 'listen = "127.0.0.1"'), 29,
     "metrics.listen", "'127.0.0.1' is not IP:PORT"),
    (('listen = "127.0.0.1:9400"', 'listen = "localhost:9400"'), 29,
     "metrics.listen", ("'localhost:9400': 'localhost' is not an IP "
                        "address: write 127.0.0.1, [::1], or 0.0.0.0 for "
                        "every address")),
    (('listen = "127.0.0.1:9400"', 'listen = "127.0.0.1:65536"'), 29,
     "metrics.listen", "the port '65536' is not a number from 1 to 65535"),
    (('listen = "127.0.0.1:9400"', 'listen = "127.0.0.1:0"'), 29,
     "metrics.listen", "the port '0' is not a number from 1 to 65535"),
    (('listen = "127.0.0.1:9400"', 'listen = "127.0.0.1:x"'), 29,
     "metrics.listen", "the port 'x' is not a number"),
    (('listen = "127.0.0.1:9400"', 'listen = "::1:9400"'), 29,
     "metrics.listen", "write an IPv6 address in brackets, as [::1]:9400"),
    (('listen = "127.0.0.1:9400"', 'listen = "[127.0.0.1]:9400"'), 29,
     "metrics.listen", "'127.0.0.1' is not an IP address"),
]


@pytest.mark.parametrize("edit, line, field, message, base",
                         [(e, ln, f, m, EXAMPLE) for e, ln, f, m in BAD]
                         + [(e, ln, f, m, WITH_METRICS)
                            for e, ln, f, m in BAD_METRICS],
                         ids=[f"{b[2]}:{b[1]}" for b in BAD + BAD_METRICS])
def test_errors_name_file_line_and_field(edit, line, field, message, base):
    text = _replace(base, *edit)
    with pytest.raises(ConfigError) as e:
        config.parse(text, "/etc/xpu/xpud.toml")
    msg = str(e.value)
    assert msg.startswith(f"/etc/xpu/xpud.toml:{line}: {field}: "), msg
    assert message in msg
    assert "\n" not in msg


def test_a_second_gpu_table_for_the_same_gpu():
    text = EXAMPLE + "\n[[gpu]]\ngpu = 1\nmode = \"shared\"\n"
    with pytest.raises(ConfigError) as e:
        config.parse(text, "x.toml")
    assert str(e.value) == ("x.toml:28: gpu[1].gpu: GPU 1 is already "
                            "configured at x.toml:7")


def test_a_missing_gpu_names_the_table():
    text = EXAMPLE + "\n[[gpu]]\nmode = \"shared\"\n"
    with pytest.raises(ConfigError, match=r"^x.toml:27: gpu\[1\].gpu: "
                                          "missing$"):
        config.parse(text, "x.toml")


def test_slice_must_be_an_array_of_tables():
    with pytest.raises(ConfigError) as e:
        config.parse('# comment\nslice = 3\n', "x.toml")
    assert str(e.value) == ("x.toml:2: slice: must be an array of tables: "
                            "write [[slice]]")


def test_lines_in_multiline_strings_are_not_tables_or_keys():
    text = ('[[slice]]\nname = "a"\npriority = """\n[[slice]]\nmemory = 1\n'
            '"""\ngpu = 0\nmemory = "1GB"\n')
    with pytest.raises(ConfigError) as e:
        config.parse(text, "x.toml")
    assert str(e.value).startswith("x.toml:8: slice[0].memory: '1GB' is "
                                   "ambiguous")


def test_inline_tables_fall_back_to_the_key_line():
    text = ('# slices\n\nslice = [\n  {name = "a", gpu = 0, memory = "1GiB"},'
            '\n  {name = "b", gpu = 0, memory = "1GB"},\n]\n')
    with pytest.raises(ConfigError) as e:
        config.parse(text, "x.toml")
    assert str(e.value).startswith("x.toml:3: slice[1].memory: '1GB' is "
                                   "ambiguous")


def test_syntax_errors_give_line_and_column():
    with pytest.raises(ConfigError) as e:
        config.parse('[defaults]\nmode = shared\n', "x.toml")
    msg = str(e.value)
    assert re.fullmatch(r"x\.toml:2:\d+: TOML syntax: .+", msg), msg
    assert "(at line" not in msg


def test_unreadable_files(tmp_path):
    p = tmp_path / "xpud.toml"
    p.write_bytes(b'[defaults]\nmode = "\xff"\n')
    with pytest.raises(ConfigError, match=f"^{p}: not UTF-8 text"):
        config.load(str(p))
    with pytest.raises(ConfigError, match=f"^{tmp_path}: cannot read: "):
        config.load(str(tmp_path))
