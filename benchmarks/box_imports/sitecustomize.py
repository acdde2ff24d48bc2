"""The GPU box's packages, simulated here: with this folder on PYTHONPATH (benchmarks/gpu_table.py --dry-run), a
module of an installed distribution that is neither in the box's image nor among the gathered wheels cannot be
imported, as on the box. $BOX_ALLOWED names a file of the allowed distribution names, one a line."""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Hidden:
    """A finder of sys.meta_path that no longer finds the blocked top-level modules (as if not installed:
    importlib.util.find_spec answers None, an import raises ModuleNotFoundError)."""

    def __init__(self, inner: object, blocked: set[str]) -> None:
        self.inner, self.blocked = inner, blocked

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if "." not in fullname and fullname in self.blocked:
            return None
        return self.inner.find_spec(fullname, path, target)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def _install() -> None:
    allowed_file = os.environ.get("BOX_ALLOWED")
    if not allowed_file:
        return
    with open(allowed_file, encoding="utf-8") as handle:
        allowed = {_canonical(line.strip()) for line in handle if line.strip()}
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    own = {name.removesuffix(".py") for name in os.listdir(repo)}  # the project's packages travel with it
    blocked = {
        module
        for module, dists in metadata.packages_distributions().items()
        if module not in own and not any(_canonical(d) in allowed for d in dists)
    }
    sys.meta_path[:] = [_Hidden(finder, blocked) for finder in sys.meta_path]


_install()
