"""Hostile uploads (built here): bombs, nested and CSV-less zips, the same zip twice. Every refusal leaves nothing on
disk, the same content is extracted once, and the uploaded zip itself is never changed."""

from __future__ import annotations

import hashlib
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import write_dataset
from utils.data.safe_zip import UnsafeArchiveError, extract_zip_safely
from utils.data.uploads import DONE_MARKER, extract_upload


def everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def zip_of(path: Path, entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def voice_zip(tmp_path_factory) -> Path:
    """A good upload: voice/metadata.csv and 5 clips."""
    root = tmp_path_factory.mktemp("voice")
    write_dataset(root / "data", n=5)
    path = root / "voice.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((root / "data").rglob("*")):
            archive.write(file, f"voice/{file.relative_to(root / 'data')}")
    return path


def refused(zip_path: Path, root: Path, match: str, **limits) -> None:
    """extract_upload refuses the zip with `match`, leaves nothing under root and the zip unchanged."""
    before = sha(zip_path)
    with pytest.raises(ValueError, match=match):
        extract_upload(zip_path, root, **limits)
    assert everything(root) == [], "a refused upload left files behind"
    assert sha(zip_path) == before


def test_bomb_is_refused_before_writing_from_its_declared_ratio(tmp_path):
    bomb = zip_of(
        tmp_path / "bomb.zip", {"voice/metadata.csv": b"audio_file|text\n", "zeros.bin": bytes(100 * 1024**2)}
    )
    assert bomb.stat().st_size < 200 * 1024  # 100 MiB in about 100 KB: the 4 MB / 3.9 GB shape
    refused(
        bomb,
        tmp_path / "datasets",
        r"entry 'zeros.bin': 104857600 bytes from \d+ compressed, a ratio over the "
        r"limit of 100:1 \(a zip bomb\?\)",
    )


def _declare_compressed_size(zip_path: Path, name: str, fake: int) -> None:
    """Make `name`'s local and central headers claim `fake` compressed bytes (its ratio then looks harmless)."""
    data = bytearray(zip_path.read_bytes())
    with zipfile.ZipFile(zip_path) as archive:
        local = archive.getinfo(name).header_offset
    data[local + 18 : local + 22] = struct.pack("<I", fake)
    central = data.find(b"PK\x01\x02")
    while central != -1:
        length = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + length] == name.encode():
            data[central + 20 : central + 24] = struct.pack("<I", fake)
        central = data.find(b"PK\x01\x02", central + 4)
    zip_path.write_bytes(bytes(data))


def test_bomb_that_lies_about_its_compressed_size_is_stopped_while_streaming(tmp_path):
    # 1 MiB of noise after it makes the archive big enough that its declared sizes look harmless (60:1).
    noise = np.random.default_rng(0).bytes(1024**2)
    bomb = zip_of(
        tmp_path / "liar.zip", {"a.txt": b"a first file", "zeros.bin": bytes(64 * 1024**2), "noise.bin": noise}
    )
    _declare_compressed_size(bomb, "zeros.bin", 60 * 1024**2)
    assert zipfile.ZipFile(bomb).getinfo("zeros.bin").compress_size == 60 * 1024**2  # the lie is what is read
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=r"entry 'zeros.bin': \d+ bytes from \d+ compressed, a ratio over"):
        extract_zip_safely(bomb, target)
    assert not target.exists(), "a.txt (written before the bomb) was removed again"


def test_bomb_whose_lie_runs_past_the_end_of_the_file_is_corrupt(tmp_path):
    bomb = zip_of(tmp_path / "short.zip", {"a.txt": b"a first file", "zeros.bin": bytes(16 * 1024**2)})
    _declare_compressed_size(bomb, "zeros.bin", 15 * 1024**2)
    with pytest.raises(UnsafeArchiveError, match=r"entry 'zeros.bin': corrupt or inconsistent data"):
        extract_zip_safely(bomb, tmp_path / "out", max_ratio=1e9)  # ratios off: the lie alone is caught
    assert not (tmp_path / "out").exists()


def test_archive_ratio_over_many_entries_is_refused(tmp_path):
    # Each entry is under the floor; together they make 16 MiB of zeros from a few KB.
    entries = {f"part{i}.bin": bytes(4 * 1024**2) for i in range(4)}
    bomb = zip_of(tmp_path / "parts.zip", entries)
    with pytest.raises(UnsafeArchiveError, match=r"archive '.*parts.zip': 16777216 bytes from \d+ compressed"):
        extract_zip_safely(bomb, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_silent_short_wav_with_a_huge_ratio_is_fine_below_the_floor(tmp_path):
    quiet = zip_of(tmp_path / "quiet.zip", {"silence.wav": bytes(2 * 1024**2)})  # ratio ~1000, but 2 MiB
    assert [p.name for p in extract_zip_safely(quiet, tmp_path / "out")] == ["silence.wav"]


def test_nested_zip_without_a_csv_is_refused_and_removed(tmp_path, voice_zip):
    nested = zip_of(tmp_path / "nested.zip", {"inner/voice.zip": voice_zip.read_bytes()})
    refused(
        nested,
        tmp_path / "datasets",
        r"The zip holds no metadata CSV \(audio_file\|text\|speaker_name\) next to "
        r"its audio. It holds another archive \(voice.zip\): zip the CSV and the "
        r"audio themselves.",
    )


def test_thousands_of_files_without_a_csv_are_refused_and_removed(tmp_path):
    many = zip_of(tmp_path / "many.zip", {f"clips/{i:05d}.wav": b"RIFF" for i in range(1_000)}, zipfile.ZIP_STORED)
    refused(many, tmp_path / "datasets", r"It holds 1000 file\(s\) and no .csv or .txt.")


def test_text_files_that_are_not_metadata_are_named(tmp_path):
    notes = zip_of(tmp_path / "notes.zip", {"readme.txt": b"recorded in 2024\n", "a.wav": b"RIFF"})
    refused(notes, tmp_path / "datasets", r"Its text files are not metadata CSVs: readme.txt.")


def test_too_many_entries_and_corrupt_zips_leave_nothing(tmp_path, voice_zip):
    refused(voice_zip, tmp_path / "datasets", r"archive has 7 entries, more than the limit of 3", max_files=3)
    (tmp_path / "broken.zip").write_bytes(voice_zip.read_bytes()[:-40])  # the central directory cut off
    refused(tmp_path / "broken.zip", tmp_path / "datasets", "not a valid zip archive")


def test_unsupported_compression_is_a_clear_refusal(tmp_path):
    path = zip_of(tmp_path / "odd.zip", {"metadata.csv": b"audio_file|text\n" * 50})
    data = bytearray(path.read_bytes())
    for at in (8, data.find(b"PK\x01\x02") + 10):  # local and central method fields: 9 = deflate64
        data[at : at + 2] = struct.pack("<H", 9)
    path.write_bytes(bytes(data))
    refused(
        path, tmp_path / "datasets", r"entry 'metadata.csv': .*not supported.*; zip it again with ordinary \(deflate\)"
    )


def test_the_same_upload_is_extracted_once_and_reused(tmp_path, voice_zip):
    root = tmp_path / "datasets"
    before = sha(voice_zip)
    first = extract_upload(voice_zip, root)
    assert not first.reused and first.train_csv == first.folder / "voice" / "metadata.csv" and first.eval_csv is None
    again = extract_upload(voice_zip, root)
    renamed = tmp_path / "renamed.zip"
    renamed.write_bytes(voice_zip.read_bytes())  # the same content uploaded under another name
    third = extract_upload(renamed, root)
    assert again.reused and third.reused and again.folder == third.folder == first.folder
    assert [p.name for p in root.iterdir()] == [first.folder.name], "one folder for one content"
    assert len([p for p in first.folder.rglob("*") if p.is_file()]) == 6 + 1  # 5 clips, the CSV, the marker
    assert sha(voice_zip) == before


def test_a_different_zip_gets_its_own_folder_and_an_interrupted_one_is_redone(tmp_path, voice_zip):
    root = tmp_path / "datasets"
    first = extract_upload(voice_zip, root)
    (first.folder / DONE_MARKER).unlink()  # as if a crash had stopped it before completion
    (first.folder / "voice" / "metadata.csv").write_text("half")
    redone = extract_upload(voice_zip, root)
    assert not redone.reused and redone.train_csv.read_text().startswith("audio_file|text|speaker_name")
    other = zip_of(tmp_path / "other.zip", {"metadata.csv": b"audio_file|text|speaker_name\nx.wav|hi|a\n"})
    assert extract_upload(other, root).folder != first.folder and len(list(root.iterdir())) == 2
