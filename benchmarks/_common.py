"""Output helpers shared by the benchmark scripts."""

from __future__ import annotations

import platform
from importlib.metadata import version as pkg_version


def markdown_table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def versions(packages: tuple[str, ...]) -> str:
    parts = [f"Python {platform.python_version()}"]
    for pkg in packages:
        try:
            parts.append(f"{pkg} {pkg_version(pkg)}")
        except Exception:
            parts.append(f"{pkg} ?")
    return ", ".join(parts)
