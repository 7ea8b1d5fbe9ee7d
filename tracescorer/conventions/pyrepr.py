"""A bounded parser for Python ``repr`` text of dataclasses: the only content some emitters give.

``openinference-instrumentation-haystack`` records Haystack's ``ChatMessage`` objects as their
reprs, e.g. ``ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='hi')],
_name=None, _meta={})``. :func:`parse` turns such text into plain data, never evaluating it:

- ``Name(a=1, b='x')`` -> ``{"__class__": "Name", "a": 1, "b": "x"}`` (positional arguments
  under ``"__args__"``);
- ``<Enum.MEMBER: 'value'>`` -> ``'value'``; other ``<...>`` reprs -> their text;
- string, bytes, number, ``None``/``True``/``False`` literals, lists, tuples, sets and dicts
  as themselves.

Input longer than :data:`MAX_CHARS` or nested deeper than :data:`MAX_DEPTH` is refused
(:class:`ReprError`), as is anything else it cannot read.
"""

from __future__ import annotations

import ast
import re
from typing import Any

MAX_CHARS = 1_000_000
MAX_DEPTH = 64

_WS = re.compile(r"\s*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NUMBER = re.compile(r"-?(?:\d[\d_]*\.?[\d_]*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)j?|-?inf|nan")
_STRING = re.compile(
    r"""(?:[rRbBuU]{0,2})(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
)
_ENUM = re.compile(r"<([A-Za-z_][\w.]*): (.*?)>")
_KWARG = re.compile(r"([A-Za-z_]\w*)\s*=(?!=)")
_CONSTANTS = {"None": None, "True": True, "False": False}
_SPACES = frozenset(" \t\r\n")


class ReprError(ValueError):
    """The text is not a repr this parser reads."""


def parse(text: str) -> Any:
    """The data of one repr (see the module docstring); :class:`ReprError` when unreadable."""
    if len(text) > MAX_CHARS:
        raise ReprError(f"repr of {len(text)} characters is over the limit of {MAX_CHARS}")
    parser = _Parser(text)
    value = parser.value(0)
    parser.skip()
    if parser.pos != len(text):
        raise ReprError(f"unexpected text at {parser.pos}: {text[parser.pos : parser.pos + 20]!r}")
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] in " \t\r\n":
            m = _WS.match(text, pos)
            if m:
                self.pos = m.end()

    def peek(self) -> str:
        text, pos = self.text, self.pos
        c = text[pos : pos + 1]
        if c in _SPACES:
            self.skip()
            c = text[self.pos : self.pos + 1]
        return c

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ReprError("nested too deep")
        # peek(), inlined: this runs once per value
        text = self.text
        c = text[self.pos : self.pos + 1]
        if c in _SPACES:
            self.skip()
            c = text[self.pos : self.pos + 1]
        if c == "[":
            return self.sequence("]", depth)
        if c == "(":
            items = self.sequence(")", depth)
            return tuple(items)
        if c == "{":
            return self.mapping(depth)
        if c == "<":
            return self.angle()
        if c in "'\"" or (c in "rRbBuU" and self.text[self.pos + 1 : self.pos + 3][:1] in "'\"rRbB"):
            m = _STRING.match(self.text, self.pos)
            if m and m.group(0)[-1:] in "'\"":
                self.pos = m.end()
                token = m.group(0)
                if token[0] in "'\"" and "\\" not in token and token[:3] not in ("'''", '"""'):
                    return token[1:-1]  # the common case: nothing to unescape
                try:
                    return ast.literal_eval(token)
                except (ValueError, SyntaxError) as exc:
                    raise ReprError(f"bad string literal at {m.start()}") from exc
        if c.isdigit() or c in "-." or (c in "in" and self.text.startswith(("inf", "nan"), self.pos)):
            m = _NUMBER.match(self.text, self.pos)
            if m and m.group(0) not in ("", "-"):
                self.pos = m.end()
                token = m.group(0).replace("_", "")
                try:
                    if token.endswith("j"):
                        return complex(token)
                    return int(token) if token.lstrip("-").isdigit() else float(token)
                except ValueError as exc:
                    raise ReprError(f"bad number at {m.start()}") from exc
        m = _NAME.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            name = m.group(0)
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            if self.peek() == "(":
                return self.call(name, depth)
            return name  # a bare name (an enum member written without <>)
        raise ReprError(f"unexpected {self.text[self.pos : self.pos + 20]!r} at {self.pos}")

    def sequence(self, close: str, depth: int) -> list[Any]:
        self.pos += 1  # the opening bracket, which value() saw
        items: list[Any] = []
        while self.peek() != close:
            items.append(self.value(depth + 1))
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c != close:
                raise ReprError(f"expected ',' or {close!r} at {self.pos}")
        self.pos += 1
        return items

    def mapping(self, depth: int) -> Any:
        self.pos += 1  # "{", which value() saw
        out: dict[Any, Any] = {}
        items: list[Any] = []
        while self.peek() != "}":
            key = self.value(depth + 1)
            if self.peek() == ":":
                self.pos += 1
                value = self.value(depth + 1)
                try:
                    out[key] = value
                except TypeError:
                    out[repr(key)] = value
            else:
                items.append(key)  # a set
            if self.peek() == ",":
                self.pos += 1
        self.pos += 1
        return items if items and not out else out

    def call(self, name: str, depth: int) -> dict[str, Any]:
        self.pos += 1  # "(", which value() saw
        out: dict[str, Any] = {"__class__": name.rsplit(".", 1)[-1]}
        args: list[Any] = []
        while self.peek() != ")":
            m = _KWARG.match(self.text, self.pos)
            if m:
                self.pos = m.end()
                out[m.group(1)] = self.value(depth + 1)
            else:
                args.append(self.value(depth + 1))
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c != ")":
                raise ReprError(f"expected ',' or ')' at {self.pos}")
        self.pos += 1
        if args:
            out["__args__"] = args
        return out

    def angle(self) -> Any:
        m = _ENUM.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            value = m.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" and "\\" not in value:
                return value[1:-1]
            try:
                return ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return value
        end = self.text.find(">", self.pos)
        if end < 0:
            raise ReprError(f"unclosed '<' at {self.pos}")
        token = self.text[self.pos : end + 1]
        self.pos = end + 1
        return token  # <object at 0x...>: its text
