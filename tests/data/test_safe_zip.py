"""Tests for utils.data.safe_zip: every refused archive raises and leaves nothing on disk."""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from utils.data.safe_zip import UnsafeArchiveError, extract_zip_safely


def make_zip(path: Path, entries) -> Path:
    """entries: list of (name or ZipInfo, bytes). A good file always comes first, so a refusal
    after it would show up as a leftover file."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def special(name: str, kind: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix, so external_attr carries st_mode
    info.external_attr = (kind | 0o777) << 16
    return info


BAD_ENTRIES = {
    "dotdot": "../evil.txt",
    "nested_dotdot": "a/../../evil.txt",
    "absolute": "/etc/evil.txt",
    "windows_drive": "C:\\evil.txt",
    "windows_drive_slash": "C:/evil.txt",
    "unc": "\\\\server\\share\\evil.txt",
    "backslash_traversal": "a\\..\\..\\evil.txt",
    "drive_relative": "C:evil.txt",
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_refuses_escaping_names(tmp_path, case):
    bad = BAD_ENTRIES[case]
    zpath = make_zip(tmp_path / "in.zip", [("good/ok.wav", b"RIFF1234"), (bad, b"pwned")])
    assert bad in zipfile.ZipFile(zpath).namelist()  # the crafted name really is in the archive
    before = tree(tmp_path)
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError) as err:
        extract_zip_safely(zpath, target)
    assert repr(bad) in str(err.value)  # the message names the bad entry
    assert not target.exists()
    assert tree(tmp_path) == before


@pytest.mark.parametrize("kind", [stat.S_IFLNK, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK])
def test_refuses_symlinks_and_special_files(tmp_path, kind):
    zpath = make_zip(tmp_path / "in.zip", [("ok.wav", b"data"), (special("link", kind), b"/etc/passwd")])
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(UnsafeArchiveError, match="'link'"):
        extract_zip_safely(zpath, target)
    assert tree(target) == []


def test_refuses_declared_size_over_limit(tmp_path):
    zpath = make_zip(tmp_path / "in.zip", [("a.wav", b"x" * 600), ("b.wav", b"y" * 600)])
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match="'b.wav'.*limit"):
        extract_zip_safely(zpath, target, max_total_bytes=1000)
    assert not target.exists()
    # The same archive is fine under a limit it fits.
    assert len(extract_zip_safely(zpath, target, max_total_bytes=1200)) == 2


def test_refuses_compressible_bomb_before_writing(tmp_path):
    zpath = make_zip(tmp_path / "in.zip", [("ok.wav", b"data"), ("bomb.bin", bytes(20 * 1024 * 1024))])
    assert zpath.stat().st_size < 100 * 1024  # tiny on disk, 20 MiB unpacked
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match="bomb.bin"):
        extract_zip_safely(zpath, target, max_total_bytes=1024 * 1024)
    assert not target.exists()


def _patch_declared_size(zpath: Path, name: str, fake_size: int) -> None:
    """Make the local header and central directory of `name` claim `fake_size` bytes."""
    data = bytearray(zpath.read_bytes())
    with zipfile.ZipFile(zpath) as zf:
        local = zf.getinfo(name).header_offset
    assert data[local : local + 4] == b"PK\x03\x04"
    data[local + 22 : local + 26] = struct.pack("<I", fake_size)
    pos = data.find(b"PK\x01\x02")
    patched = False
    while pos != -1:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + name_len] == name.encode():
            data[pos + 24 : pos + 28] = struct.pack("<I", fake_size)
            patched = True
        pos = data.find(b"PK\x01\x02", pos + 4)
    assert patched
    zpath.write_bytes(bytes(data))


def test_refuses_lying_header_and_rolls_back(tmp_path):
    zpath = make_zip(tmp_path / "in.zip", [("clips/ok.wav", b"RIFF" * 1000), ("bomb.bin", bytes(10 * 1024 * 1024))])
    _patch_declared_size(zpath, "bomb.bin", 100)
    assert zipfile.ZipFile(zpath).getinfo("bomb.bin").file_size == 100  # the lie is what is read
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match="bomb.bin"):
        extract_zip_safely(zpath, target, max_total_bytes=1024 * 1024)
    # clips/ok.wav was written before the bomb was reached; it must have been removed again.
    assert not target.exists()


def test_refuses_too_many_entries(tmp_path):
    zpath = make_zip(tmp_path / "in.zip", [(f"{i}.wav", b"x") for i in range(5)])
    with pytest.raises(UnsafeArchiveError, match="entries"):
        extract_zip_safely(zpath, tmp_path / "out", max_files=4)
    assert not (tmp_path / "out").exists()


def test_refuses_duplicate_and_file_folder_clash(tmp_path):
    with zipfile.ZipFile(tmp_path / "dup.zip", "w") as zf:
        zf.writestr("a.wav", b"1")
        with pytest.warns(UserWarning):
            zf.writestr("a.wav", b"2")
    with pytest.raises(UnsafeArchiveError, match="duplicate"):
        extract_zip_safely(tmp_path / "dup.zip", tmp_path / "out")
    make_zip(tmp_path / "clash.zip", [("a", b"file"), ("a/b.wav", b"x")])
    with pytest.raises(UnsafeArchiveError, match="both a file and a folder"):
        extract_zip_safely(tmp_path / "clash.zip", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_refuses_to_overwrite_existing_file(tmp_path):
    target = tmp_path / "out"
    (target / "wavs").mkdir(parents=True)
    mine = target / "wavs" / "b.wav"
    mine.write_bytes(b"the user's own recording")
    zpath = make_zip(tmp_path / "in.zip", [("wavs/a.wav", b"new a"), ("wavs/b.wav", b"new b")])
    with pytest.raises(UnsafeArchiveError, match="already exists"):
        extract_zip_safely(zpath, target)
    assert mine.read_bytes() == b"the user's own recording"
    assert tree(target) == ["wavs", os.path.join("wavs", "b.wav")]


def test_refuses_path_through_existing_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "link").symlink_to(outside)
    zpath = make_zip(tmp_path / "in.zip", [("link/x.wav", b"x")])
    with pytest.raises(UnsafeArchiveError, match="outside"):
        extract_zip_safely(zpath, target)
    assert list(outside.iterdir()) == []


def test_not_a_zip(tmp_path):
    (tmp_path / "x.zip").write_bytes(b"not a zip at all")
    with pytest.raises(UnsafeArchiveError):
        extract_zip_safely(tmp_path / "x.zip", tmp_path / "out")


def test_good_zip_extracts_identical_bytes(tmp_path):
    rng_bytes = os.urandom(300_000)
    content = {
        "dataset/metadata.csv": b"audio_file|text|speaker_name\nwavs/a.wav|Hello.|me\n",
        "dataset/wavs/a.wav": rng_bytes,
        "dataset/wavs/deep/er/b.wav": b"\x00\x01" * 5000,
        "dataset/notes ü.txt": "ünïcödé".encode(),
        "dataset/wavs/win\\style.wav": b"backslash separated",
    }
    zpath = tmp_path / "in.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("dataset/", b"")  # explicit folder entries are fine
        zf.writestr("dataset/empty_dir/", b"")
        zf.writestr("./dataset/./wavs/c.wav", b"dot components")
        for name, data in content.items():
            zf.writestr(name, data)
    target = tmp_path / "out" / "nested"
    paths = extract_zip_safely(zpath, target)
    content["dataset/wavs/win/style.wav"] = content.pop("dataset/wavs/win\\style.wav")
    content["dataset/wavs/c.wav"] = b"dot components"
    assert sorted(paths) == sorted(target / name for name in content)
    for name, data in content.items():
        assert (target / name).read_bytes() == data
    assert (target / "dataset" / "empty_dir").is_dir()
    # Extracting again into the same place is refused (it would overwrite) and changes nothing.
    with pytest.raises(UnsafeArchiveError):
        extract_zip_safely(zpath, target)
    for name, data in content.items():
        assert (target / name).read_bytes() == data
