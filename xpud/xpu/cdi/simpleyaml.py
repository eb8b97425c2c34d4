# SPDX-License-Identifier: Apache-2.0
"""The YAML of CDI specs, without a YAML library: block mappings and
sequences of scalars, as Go's YAML encoders write them (nvidia-ctk's
/etc/cdi/nvidia.yaml) and as `xpuctl cdi spec -o yaml` prints them.

dump(value) writes that subset.  A string is written plain only when no
YAML reader could take it for anything else (no number, boolean or null of
YAML 1.1 or 1.2, no indicator character); every other string is written
double-quoted with JSON's escapes, which YAML's double quotes accept.

load(text) reads that subset: block mappings and sequences (a sequence may
sit at its key's indentation, as Go's encoders write it), plain, single- and
double-quoted scalars, the empty flow collections [] and {}, comments and a
leading ---.  Anything else -- anchors, tags, multi-line scalars, flow
collections with content, several documents -- is refused with the line it
is on, never guessed at.
"""

from __future__ import annotations

import json
import re

_PLAIN_SAFE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./=+@%-]*")
# Words some YAML reader takes for a boolean or null (YAML 1.1's included).
_SPECIAL = {"y", "n", "yes", "no", "true", "false", "on", "off", "null",
            "~", "nan", "inf"}
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


class YamlError(ValueError):
    """The text is not in the subset: str() names the line."""


# -- writing -----------------------------------------------------------------

def _scalar(v) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        if _PLAIN_SAFE.fullmatch(v) and v.lower() not in _SPECIAL:
            return v
        return json.dumps(v)
    raise TypeError(f"cannot write {type(v).__name__} as YAML")


def _key(k) -> str:
    if not isinstance(k, str):
        raise TypeError(f"a mapping key must be a string, not {k!r}")
    return _scalar(k)


def _lines(v, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    if isinstance(v, dict):
        for k, item in v.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{_key(k)}:")
                # Sequences at their key's indentation, as Go writes them.
                out += _lines(item, indent if isinstance(item, list)
                              else indent + 2)
            else:
                out.append(f"{pad}{_key(k)}: {_flow(item)}")
        return out
    if isinstance(v, list):
        for item in v:
            if isinstance(item, (dict, list)) and item:
                sub = _lines(item, indent + 2)
                out.append(f"{pad}- {sub[0][indent + 2:]}")
                out += sub[1:]
            else:
                out.append(f"{pad}- {_flow(item)}")
        return out
    return [pad + _scalar(v)]


def _flow(v) -> str:
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return _scalar(v)


def dump(value) -> str:
    """VALUE (dicts, lists, strings, ints, floats, booleans, None) as a
    YAML document."""
    if isinstance(value, (dict, list)) and value:
        return "\n".join(["---"] + _lines(value, 0)) + "\n"
    return "---\n" + _flow(value) + "\n"


# -- reading -----------------------------------------------------------------

class _Line:
    __slots__ = ("indent", "no", "text")

    def __init__(self, no: int, indent: int, text: str):
        self.no, self.indent, self.text = no, indent, text


def _strip_comment(text: str, no: int) -> str:
    """TEXT without a trailing comment, quotes respected."""
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif quote == "'":
            if c == "'":
                quote = None
        elif c in "\"'" and (i == 0 or text[i - 1] in " -:[{,"):
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
        i += 1
    if quote:
        raise YamlError(f"line {no}: unterminated quoted string (a string "
                        "over several lines is not supported)")
    return text.rstrip()


def _split_lines(text: str) -> list[_Line]:
    lines = []
    seen_doc = False
    for no, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[:len(raw) - len(raw.lstrip())]:
            raise YamlError(f"line {no}: a tab in the indentation")
        body = _strip_comment(raw, no)
        if not body.strip():
            continue
        if body.startswith("%"):
            raise YamlError(f"line {no}: YAML directives are not supported")
        if body.rstrip() == "---" or body.startswith("--- "):
            if seen_doc or lines:
                raise YamlError(f"line {no}: more than one document")
            seen_doc = True
            rest = body[3:].strip()
            if rest:
                lines.append(_Line(no, 0, rest))
            continue
        if body.rstrip() == "...":
            continue
        stripped = body.lstrip(" ")
        lines.append(_Line(no, len(body) - len(stripped), stripped))
    return lines


_ESCAPES_JSON = set('"\\/bfnrtu')


def _parse_scalar(text: str, no: int):
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise YamlError(f"line {no}: text after a quoted string")
        body = text[1:-1]
        i = 0
        while i < len(body):
            if body[i] == "\\":
                if i + 1 >= len(body) or body[i + 1] not in _ESCAPES_JSON:
                    raise YamlError(f"line {no}: an escape sequence other "
                                    "than JSON's")
                i += 2
                continue
            if body[i] == '"':
                raise YamlError(f"line {no}: text after a quoted string")
            i += 1
        try:
            return json.loads(text)
        except ValueError as e:
            raise YamlError(f"line {no}: bad double-quoted string: "
                            f"{e}") from None
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise YamlError(f"line {no}: text after a quoted string")
        body = text[1:-1]
        if re.search(r"(?<!')'(?!')", body.replace("''", "")):
            raise YamlError(f"line {no}: text after a quoted string")
        return body.replace("''", "'")
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if text[0] in "[{&*!|>@`%":
        raise YamlError(f"line {no}: {text[0]!r} starts YAML this reader "
                        "does not support (flow collections, anchors, "
                        "aliases, tags, block scalars)")
    if text in ("null", "Null", "NULL", "~"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if ": " in text or text.endswith(":"):
        raise YamlError(f"line {no}: a mapping where a value was expected")
    return text


def _split_key(text: str, no: int):
    """(key, rest) of a mapping entry 'key: rest', or None when TEXT is not
    one."""
    if text[:1] in "\"'":
        q = text[0]
        end = 1
        while True:
            end = text.find(q, end)
            if end < 0:
                return None
            if q == '"' and text[end - 1] == "\\":
                end += 1
                continue
            if q == "'" and text[end + 1:end + 2] == "'":
                end += 2
                continue
            break
        key_text, after = text[:end + 1], text[end + 1:]
        if not (after == ":" or after.startswith(": ")):
            return None
        return _parse_scalar(key_text, no), after[1:].strip()
    m = re.match(r"([^\s:][^:]*?|[^\s:]*):(\s+|$)", text)
    if not m or m.group(1)[:1] in "-[{&*!|>" and m.group(1) != "-":
        return None
    return m.group(1), text[m.end():].strip()


class _Parser:
    def __init__(self, lines: list[_Line]):
        self.lines = lines
        self.i = 0

    def peek(self) -> _Line | None:
        return self.lines[self.i] if self.i < len(self.lines) else None

    def block(self, indent: int):
        """The node whose first line is the next, at INDENT."""
        line = self.peek()
        if line.text == "-" or line.text.startswith("- "):
            return self.sequence(line.indent)
        if _split_key(line.text, line.no) is not None:
            return self.mapping(line.indent)
        self.i += 1
        return _parse_scalar(line.text, line.no)

    def value_after_key(self, rest: str, key_line: _Line, key_indent: int):
        if rest:
            return _parse_scalar(rest, key_line.no)
        nxt = self.peek()
        if nxt is None:
            return None
        if nxt.indent > key_indent:
            return self.block(nxt.indent)
        # A sequence may sit at its key's indentation.
        if nxt.indent == key_indent and (nxt.text == "-" or
                                         nxt.text.startswith("- ")):
            return self.sequence(key_indent)
        return None

    def mapping(self, indent: int) -> dict:
        out: dict = {}
        while True:
            line = self.peek()
            if line is None or line.indent < indent:
                return out
            if line.indent > indent:
                raise YamlError(f"line {line.no}: unexpected indentation")
            if line.text == "-" or line.text.startswith("- "):
                return out  # the parent's sequence goes on
            kv = _split_key(line.text, line.no)
            if kv is None:
                raise YamlError(f"line {line.no}: expected 'key: value'")
            key, rest = kv
            if not isinstance(key, str):
                raise YamlError(f"line {line.no}: a key must be a string")
            if key in out:
                raise YamlError(f"line {line.no}: key '{key}' twice")
            self.i += 1
            out[key] = self.value_after_key(rest, line, indent)

    def sequence(self, indent: int) -> list:
        out = []
        while True:
            line = self.peek()
            if line is None or line.indent < indent:
                return out
            if line.indent > indent:
                raise YamlError(f"line {line.no}: unexpected indentation")
            if not (line.text == "-" or line.text.startswith("- ")):
                return out
            rest = line.text[1:].lstrip(" ")
            if not rest:
                self.i += 1
                nxt = self.peek()
                if nxt is None or nxt.indent <= indent:
                    out.append(None)
                else:
                    out.append(self.block(nxt.indent))
                continue
            # "- key: v" or "- - x": the item's content starts at the
            # column after the dash; treat it as a line of its own.
            col = indent + (len(line.text) - len(rest))
            self.lines[self.i] = _Line(line.no, col, rest)
            out.append(self.block(col))


def load(text: str):
    """The value of the YAML document TEXT (see the module's docstring for
    the subset).  Raises YamlError naming the line."""
    lines = _split_lines(text)
    if not lines:
        return None
    p = _Parser(lines)
    first = lines[0]
    if first.indent != 0:
        raise YamlError(f"line {first.no}: the document must start at "
                        "column 0")
    value = p.block(0)
    if p.peek() is not None:
        raise YamlError(f"line {p.peek().no}: unexpected text after the "
                        "document")
    return value
