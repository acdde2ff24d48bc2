"""Every path that arrives from the web stays inside the folders the app owns.

A typed or uploaded path is resolved (symlinks and `..` included) and must lie inside one of the
roots: the output folder (runs, prepared datasets, exports), the data folders the operator listed
at launch (`--data-dir`), Gradio's upload folder, and for base models the models folder. Anything
else is refused with a message that says how to allow it; nothing outside is ever opened.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.data.mix import parse_entry
from utils.data.transcription import looks_like_path
from utils.text.visible import clipped


class PathRefused(ValueError):
    """A path from the web lies outside the folders the app may use."""


def upload_folder() -> Path:
    """Where Gradio keeps uploaded files (GRADIO_TEMP_DIR, else <tmp>/gradio)."""
    from gradio.utils import get_upload_folder

    return Path(get_upload_folder()).resolve()


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class AppRoots:
    output_dir: Path
    data_dirs: tuple[Path, ...] = ()
    models_dir: Path | None = None
    uploads: Path = field(default_factory=upload_folder)

    @property
    def datasets_dir(self) -> Path:
        return self.output_dir / "datasets"

    def data_roots(self) -> tuple[Path, ...]:
        """Where datasets may be read from: the app's datasets folder, the operator's data folders, uploads."""
        return (self.datasets_dir.resolve(), *(d.resolve() for d in self.data_dirs), self.uploads)

    def confine(self, value: str | os.PathLike, roots: tuple[Path, ...], what: str) -> Path:
        """`value` resolved, if it lies inside one of `roots`; PathRefused otherwise (nothing is opened)."""
        text = str(value).strip()
        if not text or "\x00" in text:
            raise PathRefused(f"{what}: no usable path given.")
        resolved = Path(text).expanduser().resolve()
        if not any(inside(resolved, root) for root in roots):
            allowed = ", ".join(str(r) for r in roots)
            raise PathRefused(
                f"{what}: {clipped(text)} is outside the folders this app may use ({allowed}). Upload the "
                "data as a zip, or start the app with --data-dir FOLDER to allow a folder of yours."
            )
        return resolved

    def dataset_file(self, value: str | os.PathLike, what: str = "CSV") -> Path:
        return self.confine(value, self.data_roots(), what)

    def audio_roots(self, *csv_paths: Any) -> tuple[Path, ...]:
        """Where the audio these CSVs name may lie (each CSV's own upload or data folder). A list of datasets
        (utils.data.mix: `lang:rate=path` entries, eval paths) gives each of its CSVs."""
        paths: list[Any] = []
        for value in csv_paths:
            if isinstance(value, (list, tuple)):
                paths += [parse_entry(v, "en").csv for v in value if v]
            elif value:
                paths.append(value)
        return tuple(dict.fromkeys(root for csv in paths for root in self._audio_root(csv)))

    def _audio_root(self, csv_path: str | os.PathLike) -> tuple[Path, ...]:
        """Inside the CSV's own upload (an uploaded file's folder, an extracted zip, a prepared dataset), or
        inside the operator's data folder that holds it."""
        csv = Path(csv_path).resolve()
        for root in (self.uploads, self.datasets_dir.resolve()):
            if root in csv.parents:
                own = root / csv.relative_to(root).parts[0]
                if own.name == "uploads" and own.parent == self.datasets_dir.resolve():  # datasets/uploads/<hash>/
                    own = own / csv.relative_to(own).parts[0]
                return (own,)
        return tuple(d.resolve() for d in self.data_dirs if d.resolve() in csv.parents) or (csv.parent,)

    def run_folder(self, value: str | os.PathLike, what: str = "run") -> Path:
        """A run of this app: a run folder's name, or a path inside the output folder (a file in it counts)."""
        text = str(value).strip()
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}", text) and ".." not in text:
            text = str(self.output_dir / text)  # a run name
        return self.confine(text, (self.output_dir.resolve(),), what)

    def model_file(self, value: str | os.PathLike, what: str = "custom model") -> Path:
        roots = (self.output_dir.resolve(), *((self.models_dir.resolve(),) if self.models_dir else ()))
        return self.confine(value, roots, what)

    def whisper_model(self, value: str) -> str:
        """A Whisper model as the web gives it: a name (small, large-v3) or a Hub id (owner/name) as it is, a
        folder only inside the models folder's whisper/ (faster-whisper would load any folder it is given)."""
        text = str(value or "").strip()
        if not text:
            raise PathRefused("Whisper model: give a name (tiny, small, large-v3...) or a folder under models/whisper.")
        if not looks_like_path(text):  # the transcriber's own rule: a name is never a folder here
            return text
        root = (self.models_dir or Path("models")).resolve() / "whisper"
        return str(self.confine(text, (root,), "Whisper model folder"))
