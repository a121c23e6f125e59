"""Options declared once: a dataclass field holds its default, its help, its check and its command-line flags, and a
command line's flags are made from those declarations (``add_flags``), never written out a second time.

The engine's options (``engine.options.InterpolatorOptions``) and the video options
(``pipeline.video.VideoOptions``) are declared this way; ``engine.options.add_flags`` is the one call a tool makes.
Declaring flags does nothing else: no logging set up, nothing read (a command line shows the library's notes when
it runs: ``engine.options.show_notes``). The module sits here, at the bottom of the layers that declare options
(media imports nothing of ours; engine and pipeline import media), as ``media.errors`` does for their messages.
"""

from __future__ import annotations

import argparse
from dataclasses import Field, field, fields
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that names each option's default where it has one that its help does not already name ("(default 2)
    (default: None)" was printed) and it takes a value (switches said "(default: False)", and ``--eager`` "(default:
    True)", its field's value): the formatter of every command line here."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default is None or action.nargs == 0 or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def option(default: Any, help: str, check: Optional[Callable[[Any], bool]] = None, rule: str = "",
           frames: bool = True, flags: Sequence[Tuple[Tuple[str, ...], Dict[str, Any]]] = (),
           exclusive: bool = False) -> Any:
    """One option's whole declaration, as a dataclass field.

    ``help``: what it does (also the flag's help where ``flags`` gives none); ``check`` / ``rule``: the test its
    value passes and the fix said when it does not (the options class raises ValueError naming the field, and a
    number flag's type says the flag at once); ``frames``: whether the option changes the frames, so that a
    resumed job made with another value starts over; ``flags``: the command-line flags, as (names, argparse
    keywords), ``exclusive`` where only one of them may be given. A flag that stores into the field (its ``dest``,
    by argparse's rule or given) defaults to the field's default unless its keywords state another: the default
    is stated once, here."""
    return field(default=default, metadata={"help": help, "check": check, "rule": rule, "frames": frames,
                                            "flags": tuple(flags), "exclusive": exclusive})


def _dest(flag_names: Sequence[str], kwargs: Mapping[str, Any]) -> str:
    """Where argparse stores a flag's value: its ``dest``, else its first long name with dashes as underscores."""
    long = [name for name in flag_names if name.startswith("--")] or list(flag_names)
    return kwargs.get("dest", long[0].lstrip("-").replace("-", "_"))


def declared_field(options: type, name: str) -> Field:
    """The field ``name`` of the options class ``options`` (ValueError naming the class if it has none)."""
    for f in fields(options):
        if f.name == name:
            return f
    raise ValueError(f"add_flags: {name!r} is no field of {options.__name__}")


def add_flags(parser: Any, options: type, only: Sequence[str] = (), defaults: Optional[Mapping[str, Any]] = None,
              several: Sequence[str] = (), required: Sequence[str] = ()) -> None:
    """The command-line flags of every field of ``options`` (or of the fields named in ``only``), from their
    declarations (``option``), in the fields' order, on ``parser`` (a parser or an argument group).

    ``defaults``: a protocol's own defaults, by field, checked by the field's declared check (None: no default,
    the tool decides and says so in its help); the flags still change them. ``several``: fields that take one or
    more values, a list (by default the field's default alone, or none where the flag's declared default is None:
    ``--weights``, which without ``--model`` names no file). ``required``: fields whose flag must be given."""
    defaults = dict(defaults or {})
    for name in (*only, *defaults, *several, *required):
        declared_field(options, name)
    for name, value in defaults.items():
        check = declared_field(options, name).metadata
        values = [] if value is None else list(value) if name in several else [value]
        if check["check"] is not None and not all(check["check"](v) for v in values):
            raise ValueError(f"add_flags: the default {name}={value!r}: {check['rule']}")
    for f in fields(options):
        if only and f.name not in only:
            continue
        group: Any = parser.add_mutually_exclusive_group() if f.metadata["exclusive"] else parser
        for flag_names, declared in f.metadata["flags"]:
            kwargs = {"help": f.metadata["help"], **declared}
            own = _dest(flag_names, kwargs) == f.name
            if f.name in several and not own:
                continue  # (--model names one file: several are --weights)
            if kwargs.get("type") in (int, float) and f.metadata["check"] is not None:
                kwargs["type"] = _checked(f, flag_names[0], kwargs["type"])
            if own:
                kwargs["default"] = defaults.get(f.name, declared.get("default", f.default))
            if f.name in several:
                kwargs["nargs"] = "+"
                kwargs["help"] += "; one or more, each in turn"
                if f.name not in defaults:
                    kwargs["default"] = [] if "default" in declared and declared["default"] is None else \
                        [kwargs["default"]]
            if f.name in required:
                kwargs["required"] = True
            group.add_argument(*flag_names, **kwargs)


def _checked(option: Field, flag: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` then ``option``'s declared check: a bad value is argparse's one line naming ``flag``."""
    check = option.metadata

    def value(text: str) -> Any:
        try:
            parsed = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not check["check"](parsed):
            raise argparse.ArgumentTypeError(f"{text}: {check['rule']}")
        return parsed
    value.__name__ = parse.__name__
    return value


def declared_flag(option: Field) -> str:
    """How a command line names a field: its flag named after it (``--weights``, not ``--model``), or its one flag
    (``--eager``, ``--fields``), with the short form after it (``--overwrite (-y)``); else all its flags (``--fp32,
    --fp16 or --bf16``)."""
    declared = [names for names, _ in option.metadata["flags"]]
    own = [names for names in declared if names[0].lstrip("-").replace("-", "_") == option.name]
    if own or len(declared) == 1:
        names = (own or declared)[0]
        return names[0] + "".join(f" ({name})" for name in names[1:] if not name.startswith("--"))
    firsts = [names[0] for names in declared]
    return ", ".join(firsts[:-1]) + f" or {firsts[-1]}"


def declared_flags(options: type) -> Dict[str, str]:
    """Field -> how a command line names it (``declared_flag``), for each field of ``options`` that has flags."""
    return {f.name: declared_flag(f) for f in fields(options) if f.metadata.get("flags")}


def frames_fields(options: Any) -> Tuple[str, ...]:
    """The fields of ``options`` (a class or an instance) declared to change the frames."""
    return tuple(f.name for f in fields(options) if f.metadata.get("frames", True))
