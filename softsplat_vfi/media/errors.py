"""Messages that name options, said in the library's words: a field by its name (``tile``, ``audio_codec``).

A command line says the same message with its own flags (``--tile``, ``--audio-codec``): ``Said.said_as`` takes
the names to use, and ``engine.options.cli_message`` passes the command line's table. The class sits here, at the
bottom of the layers that raise such errors (media imports nothing of ours; engine and pipeline import media).
"""

from __future__ import annotations

import string
from typing import Any, Callable, Optional, Tuple, Union


class _Name:
    """A field as ``Said`` says it: ``{tile}`` is its name; ``{tile:=0}`` is ``tile=0`` in the library's words,
    ``--tile 0`` in a command line's (``{overwrite:=True}``: ``overwrite=True``, or ``--overwrite``)."""

    def __init__(self, name: str, flag: bool) -> None:
        self.name, self.flag = name, flag

    def __format__(self, spec: str) -> str:
        if not spec.startswith("="):
            return format(self.name, spec)
        value = spec[1:]
        if not self.flag:
            return f"{self.name}={value}"
        return self.name if value == "True" else f"{self.name} {value}"


class Said:
    """Text that names option fields: each ``{name}`` placeholder of ``template`` that is not among ``values`` is
    a field (``{name:=value}``: the field given that value); the values fill the rest (``str.format``, so a
    value's own braces stay as they are: paths like ``out-{i}.png``).

        Said("{tile} {value}: use auto, 0 or a size in pixels", value=7)  # "tile 7: ...", or "--tile 7: ..."
    """

    def __init__(self, template: str, **values: Any) -> None:
        self.template = template
        self.values = values
        names = [name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name]
        self.fields: Tuple[str, ...] = tuple(dict.fromkeys(name for name in names if name not in values))

    def followed_by(self, text: str) -> "Said":
        """This text with ``text`` after it, taken as it is (its braces are not fields)."""
        return Said(self.template + text.replace("{", "{{").replace("}", "}}"), **self.values)

    def said_as(self, flag: Optional[Callable[[str], str]] = None) -> str:
        """The text with each field said by its name, or as ``flag(field)`` (a command line's flag)."""
        names = {field: _Name(field if flag is None else flag(field), flag is not None) for field in self.fields}
        return self.template.format(**names, **self.values)

    def __str__(self) -> str:
        return self.said_as()

    def __repr__(self) -> str:
        return f"Said({str(self)!r})"


class FieldError(ValueError):
    """A ValueError whose message names the option at fault and the fix (``Said``; a plain string names none).

    ``str(exc)`` names fields as a library user passes them; ``fields`` lists them, ``field`` is the first (the
    one at fault), and ``said_as(flag)`` says the message with a command line's flags."""

    def __init__(self, message: Union[str, Said]) -> None:
        self.said = message if isinstance(message, Said) else None
        self.fields: Tuple[str, ...] = self.said.fields if self.said is not None else ()
        self.field = self.fields[0] if self.fields else None
        super().__init__(str(message))

    def said_as(self, flag: Optional[Callable[[str], str]] = None) -> str:
        return self.said.said_as(flag) if self.said is not None else str(self)

    def followed_by(self, text: str) -> Union[str, Said]:
        """This error's message with ``text`` after it, its fields still fields (for the same error raised again
        with more to say)."""
        return self.said.followed_by(text) if self.said is not None else f"{self}{text}"
