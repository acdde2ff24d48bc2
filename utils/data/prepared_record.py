"""What a prepared folder records about its own clips (`prepared.json`), so a run on it reads no clip again.

Prepare writes every clip itself and probes it once written: its size, modification time, duration, format and
levels, and the digest of its first 64 KiB (`ClipProbe`). A check of the prepared CSVs is served these probes
for every clip whose size and modification time are unchanged, without opening it; a clip edited since (or
copied without its times) is read as any other. The record also holds the prepared dataset's fingerprint, the
one a run computes (DatasetReport.fingerprint: rows by content), so a run on the folder resumes by it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from utils.data.clip_probe import ClipProbe, head_digest
from utils.data.csv_reader import CsvRow, iter_rows, resolve_audio_path
from utils.files import write_text_atomic

RECORD_FILE = "prepared.json"
RECORD_FORMAT = 1


def read_record(folder: str | os.PathLike) -> tuple[str, dict[str, ClipProbe]]:
    """(fingerprint, {clip name as the CSVs write it: probe}) of a prepared folder; ("", {}) when it has no
    readable record."""
    try:
        data = json.loads((Path(folder) / RECORD_FILE).read_text(encoding="utf-8"))
        if data.get("format") != RECORD_FORMAT:
            return "", {}
        return str(data.get("fingerprint", "")), {str(k): ClipProbe.from_json(v) for k, v in data["clips"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return "", {}


def recorded_probes(csv_path: str | os.PathLike) -> dict[str, ClipProbe]:
    """The recorded probes of the clips of the folder `csv_path` is in, by audio location as its rows resolve."""
    folder = str(Path(csv_path).parent)
    _, clips = read_record(folder)
    return {resolve_audio_path(name, folder): probe for name, probe in clips.items()}


def write_record(folder: Path, clips: dict[str, ClipProbe], fingerprint: str) -> None:
    data = {
        "format": RECORD_FORMAT,
        "fingerprint": fingerprint,
        "clips": {name: probe.to_json() for name, probe in sorted(clips.items())},
    }
    write_text_atomic(folder / RECORD_FILE, json.dumps(data, separators=(",", ":")))


def prepared_fingerprint(train_csv: Path, eval_csv: Path, probes: dict[str, ClipProbe]) -> str:
    """The fingerprint a check of these two CSVs reports when every row is usable (DatasetReport.fingerprint),
    from the clips' probes (by audio location) or, for a clip without one, its file."""
    digest = hashlib.sha256()
    for split, path in (("train", train_csv), ("eval", eval_csv)):
        for row in iter_rows(path):
            if not isinstance(row, CsvRow):
                continue
            probe = probes.get(row.audio_location)
            if probe is not None and probe.head_sha256:
                size, head = probe.size, probe.head_sha256
            else:
                try:
                    size, head = os.path.getsize(row.audio_location), head_digest(row.audio_location)
                except OSError:
                    size, head = -1, hashlib.sha256(b"").hexdigest()
            digest.update(f"{split}\0{row.text}\0{row.speaker_name}\0{size}\0".encode())
            digest.update(bytes.fromhex(head))
    return digest.hexdigest()
