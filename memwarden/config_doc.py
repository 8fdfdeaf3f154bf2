"""The production configuration reference, generated from `Settings` so it cannot drift from the code.

`python -m memwarden.config_doc --write deploy/README.md` rewrites the generated section of that
file; `--check` exits 1 when it is out of date (the test suite runs the same comparison).

What is "required in production" is not written down twice: it is discovered by asking the
settings' own validator, starting from the production profile with nothing set and adding a value
for each variable the validator names as required until it accepts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from memwarden.config import SECRET_FIELDS, Profile, Settings

BEGIN = "<!-- BEGIN GENERATED: configuration reference (python -m memwarden.config_doc --write deploy/README.md) -->"
END = "<!-- END GENERATED: configuration reference -->"
ENV_PREFIX = "MEMWARDEN_"
_REQUIRED = re.compile(r"MEMWARDEN_([A-Z0-9_]+) is required")
_PLACEHOLDER = "x"
_STRONG_PLACEHOLDERS = {"auth_secret": "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"}
"""Settings whose value is checked beyond presence (the secret's strength), so "x" would not settle them."""
_DATA_DIR = "<data_dir>"


class _InitOnly(Settings):
    """Settings that read only their arguments: the reference must not depend on this shell's environment."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def field_of(env: str) -> str | None:
    """The Settings field an environment variable sets, or None if it sets nothing."""
    if not env.startswith(ENV_PREFIX):
        return None
    name = env[len(ENV_PREFIX) :].lower()
    return name if name in Settings.model_fields else None


def production_required() -> list[str]:
    """Fields the production profile refuses to start without (with every other setting at its default)."""
    given: dict[str, object] = {"profile": Profile.PRODUCTION}
    found: list[str] = []
    for _ in range(len(Settings.model_fields)):
        try:
            _InitOnly(**given)  # type: ignore[arg-type]
            return found
        except ValidationError as exc:
            match = _REQUIRED.search(str(exc))
            if match is None:
                raise
            name = match.group(1).lower()
            if name not in Settings.model_fields or name in given:
                raise
            found.append(name)
            given[name] = _STRONG_PLACEHOLDERS.get(name, _PLACEHOLDER)
    raise RuntimeError("the production profile's requirements did not settle")


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " \\| ".join(_type_text(a) for a in parts)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return f"JSON list of {_type_text(item)}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _constraints(info: FieldInfo) -> str:
    out: list[str] = []
    for meta in info.metadata:
        for attr, sym in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sym} {value}")
        if getattr(meta, "pattern", None):
            out.append(f"matches `{meta.pattern}`")
    return ", ".join(out)


def _value_text(value: object, data_dir: Path) -> str:
    if value is None:
        return "unset"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, list):
        value = "[]" if not value else ",".join(map(str, value))
    if isinstance(value, dict):  # JSON, as the environment variable takes it
        value = json.dumps(
            {k: v.model_dump(exclude_defaults=True) if isinstance(v, BaseModel) else v for k, v in value.items()},
            separators=(",", ":"),
        )
    text = str(value).replace(str(data_dir.resolve()), _DATA_DIR)
    return f"`{text}`" if text else '`""`'


def reference() -> str:
    """The generated Markdown: one row per setting, with both profiles' effective defaults."""
    required = production_required()
    embedded = _InitOnly()
    values = {name: _STRONG_PLACEHOLDERS.get(name, _PLACEHOLDER) for name in required}
    production = _InitOnly(profile=Profile.PRODUCTION, **values)  # type: ignore[arg-type]
    rows = [
        "| variable | type | embedded default | production default | description |",
        "|---|---|---|---|---|",
    ]
    for name, info in Settings.model_fields.items():
        kind = _type_text(info.annotation)
        limits = _constraints(info)
        if limits:
            kind = f"{kind} ({limits})"
        emb = _value_text(getattr(embedded, name), embedded.data_dir)
        prod = "**required**" if name in required else _value_text(getattr(production, name), production.data_dir)
        notes = (info.description or "").replace("|", "\\|")
        if name in SECRET_FIELDS:
            notes = f"{notes} **Secret.**".strip()
        rows.append(f"| `{env_name(name)}` | {kind} | {emb} | {prod} | {notes} |")
    lines = [
        BEGIN,
        "",
        f"{len(Settings.model_fields)} settings, each an environment variable. Lists are JSON "
        '(`["a","b"]`). **Secret** settings belong in a Kubernetes Secret or an env file, never a ConfigMap. '
        f"Required in production: {', '.join(f'`{env_name(n)}`' for n in required)}.",
        "",
        *rows,
        "",
        END,
    ]
    return "\n".join(lines)


def splice(document: str, generated: str) -> str:
    """`document` with its generated section replaced by `generated` (markers included)."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError("the document has no generated-section markers")
    return document[:start] + generated + document[end + len(END) :]


def is_current(path: Path) -> bool:
    text = path.read_text()
    return splice(text, reference()) == text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", type=Path, default=Path("deploy/README.md"))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated section in place")
    mode.add_argument("--check", action="store_true", help="exit 1 when the generated section is out of date")
    args = parser.parse_args(argv)
    if args.write:
        args.path.write_text(splice(args.path.read_text(), reference()))
        return 0
    if args.check:
        if is_current(args.path):
            return 0
        print(f"{args.path} is out of date: run python -m memwarden.config_doc --write {args.path}", file=sys.stderr)
        return 1
    print(reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
