"""Tests for utils.data.csv_index: offsets, random access, cache validity, and read-only sources."""

from __future__ import annotations

import hashlib
import json
import os
import random

import numpy as np
import pytest

from utils.data.csv_index import CsvRowIndex, build_offset_index, cache_paths

BOM = b"\xef\xbb\xbf"
# Small chunk sizes force lines, CRLFs and the BOM to straddle chunk boundaries.
CHUNKS = [1, 2, 3, 7, 8 * 1024 * 1024]


def naive_offsets(data: bytes, has_header: bool) -> list[int]:
    """Independent reference: walk the lines one by one in pure Python."""
    pos = 3 if data.startswith(BOM) else 0
    out = []
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl == -1 else nl
        if data[pos:end] not in (b"", b"\r"):
            out.append(pos)
        pos = end + 1
    return out[1:] if has_header else out


def expected_rows(data: bytes, has_header: bool) -> list[str]:
    text = data.decode("utf-8")
    text = text[1:] if text.startswith("\ufeff") else text
    rows = [line for line in text.splitlines() if line]
    return rows[1:] if has_header else rows


CASES = {
    # name: (bytes, has_header, hand-computed offsets)
    "lf": (b"h|t\na|1\nbb|2\n", True, [4, 8]),
    "crlf": (b"h|t\r\na|1\r\nbb|2\r\n", True, [5, 10]),
    "bom": (BOM + b"h|t\na|1\n", True, [7]),
    "bom_no_header": (BOM + b"a|1\nb|2\n", False, [3, 7]),
    "blank_lines": (b"\n\nh|t\n\r\na|1\n\n\r\nb|2\n\n", True, [8, 15]),
    "no_trailing_newline": (b"h|t\na|1\nb|2", True, [4, 8]),
    "no_header": (b"a|1\nb|2\n", False, [0, 4]),
    "header_only": (b"h|t\n", True, []),
    "empty": (b"", True, []),
    "trailing_cr_only": (b"a\n\r", False, [0]),
    "unicode": ("h|t\nwavs/ä.wav|你好。|spk\nb|ሰላም።|s\n".encode(), True, [4, 30]),
}


@pytest.mark.parametrize("chunk_size", CHUNKS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_offsets(tmp_path, name, chunk_size):
    data, has_header, expected = CASES[name]
    csv = tmp_path / "m.csv"
    csv.write_bytes(data)
    offsets = build_offset_index(csv, has_header=has_header, chunk_size=chunk_size)
    assert offsets.dtype == np.int64
    assert offsets.tolist() == expected
    assert offsets.tolist() == naive_offsets(data, has_header)


def test_progress_called_per_chunk(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_bytes(b"h|t\n" + b"".join(b"wavs/%d.wav|text %d|s\n" % (i, i) for i in range(200)))
    calls = []
    build_offset_index(csv, progress=lambda done, total: calls.append((done, total)), chunk_size=1000)
    size = csv.stat().st_size
    assert len(calls) == -(-size // 1000)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    assert calls[-1] == (size, size)


def random_csv(rng: random.Random, rows: int, crlf: bool, bom: bool) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    words = ["voice", "speech", "Grüße", "你好", "ሰላም", "مرحبا", "नमस्ते", "data", "clip"]
    lines = [b"audio_file|text|speaker_name"]
    for i in range(rows):
        if rng.random() < 0.1:
            lines.append(b"")  # blank lines scattered through the file
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        lines.append(f"wavs/clip_{i:07d}.wav|{text}|speaker_{i % 4}".encode())
    data = nl.join(lines)
    if rng.random() < 0.5:
        data += nl
    return (BOM if bom else b"") + data


@pytest.mark.parametrize("crlf,bom", [(False, False), (True, True)])
def test_random_access_matches_splitlines(tmp_path, crlf, bom):
    rng = random.Random(1234 + crlf)
    data = random_csv(rng, 500, crlf, bom)
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "metadata.csv"
    csv.write_bytes(data)
    expected = expected_rows(data, True)
    with CsvRowIndex.open(csv, tmp_path / "cache", chunk_size=4096) as index:
        assert len(index) == len(expected) == 500
        for i in rng.sample(range(len(expected)), 200):
            assert index.row_text(i) == expected[i]
        assert index.row_text(-1) == expected[-1]
        assert index.row_bytes(0) == expected[0].encode("utf-8")
        assert list(index.iter_rows()) == expected
        assert list(index.iter_rows(10, 20)) == expected[10:20]
        # Interleaving random reads with a running iterator must not disturb it.
        it = index.iter_rows(100, 105)
        got = [next(it)]
        index.row_text(3)
        got.extend(it)
        assert got == expected[100:105]
        with pytest.raises(IndexError):
            index.row_text(len(expected))


def _snapshot(path):
    return path.read_bytes(), path.stat().st_mtime_ns


def test_cache_reuse_and_invalidation(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "my metadata (v1).csv"
    csv.write_bytes(b"audio_file|text|speaker_name\nwavs/a.wav|Hello.|s\nwavs/b.wav|World.|s\n")
    cache = tmp_path / "cache"

    with CsvRowIndex.open(csv, cache) as index:
        assert index.built_now
        assert len(index) == 2
    npy, sidecar = cache_paths(csv, cache)
    assert npy.parent == cache and npy.name.endswith(".rowidx.npy")
    assert npy.name.startswith("my_metadata_v1_.csv-")
    meta = json.loads(sidecar.read_text())
    assert meta["source"] == str(csv.resolve())
    assert meta["size"] == csv.stat().st_size
    assert meta["mtime_ns"] == csv.stat().st_mtime_ns
    first_sidecar_mtime = sidecar.stat().st_mtime_ns

    # Unchanged source: loaded from cache, nothing rewritten.
    with CsvRowIndex.open(csv, cache) as index:
        assert not index.built_now
        assert index.row_text(1) == "wavs/b.wav|World.|s"
    assert sidecar.stat().st_mtime_ns == first_sidecar_mtime

    # has_header is part of the key.
    with CsvRowIndex.open(csv, cache, has_header=False) as index:
        assert index.built_now and len(index) == 3

    # Appending a row invalidates the cache.
    with open(csv, "ab") as f:
        f.write(b"wavs/c.wav|Again.|s\n")
    with CsvRowIndex.open(csv, cache) as index:
        assert index.built_now
        assert index.row_text(2) == "wavs/c.wav|Again.|s"
    with CsvRowIndex.open(csv, cache) as index:
        assert not index.built_now

    # Same size, same bytes, only the mtime differs: rebuilt.
    st = csv.stat()
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    with CsvRowIndex.open(csv, cache) as index:
        assert index.built_now

    # Same-size edit with the mtime put back: the head/tail hash catches it, rows are re-read.
    st = csv.stat()
    data = csv.read_bytes().replace(b"World.", b"Earth.")
    csv.write_bytes(data)
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert csv.stat().st_size == st.st_size and csv.stat().st_mtime_ns == st.st_mtime_ns
    with CsvRowIndex.open(csv, cache) as index:
        assert index.built_now
        assert index.row_text(1) == "wavs/b.wav|Earth.|s"


def test_same_size_edit_changes_row_boundaries(tmp_path):
    # A same-size edit that moves a newline must give new offsets, not the cached ones.
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "m.csv"
    csv.write_bytes(b"h\nab\ncd\n")
    with CsvRowIndex.open(csv, tmp_path / "c") as index:
        assert list(index.iter_rows()) == ["ab", "cd"]
    st = csv.stat()
    csv.write_bytes(b"h\na\nbcd\n")
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns))
    with CsvRowIndex.open(csv, tmp_path / "c") as index:
        assert index.built_now
        assert list(index.iter_rows()) == ["a", "bcd"]


def test_corrupt_cache_is_rebuilt(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "m.csv"
    csv.write_bytes(b"h\nx\ny\n")
    cache = tmp_path / "c"
    CsvRowIndex.open(csv, cache).close()
    npy, _ = cache_paths(csv, cache)
    npy.write_bytes(b"not an npy file")
    with CsvRowIndex.open(csv, cache) as index:
        assert index.built_now
        assert list(index.iter_rows()) == ["x", "y"]


def test_source_untouched_and_nothing_written_next_to_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "metadata.csv"
    data = random_csv(random.Random(7), 300, crlf=True, bom=True)
    csv.write_bytes(data)
    os.chmod(csv, 0o444)  # the user's file is read-only to us
    before_hash = hashlib.sha256(data).hexdigest()
    before_mtime = csv.stat().st_mtime_ns
    before_listing = sorted(os.listdir(src))

    cache = tmp_path / "cache"
    for _ in range(2):
        with CsvRowIndex.open(csv, cache) as index:
            list(index.iter_rows())
            index.row_text(5)

    assert hashlib.sha256(csv.read_bytes()).hexdigest() == before_hash
    assert csv.stat().st_mtime_ns == before_mtime
    assert sorted(os.listdir(src)) == before_listing
    assert len(os.listdir(cache)) == 2  # index + sidecar, no temp files left over

    with pytest.raises(ValueError):
        CsvRowIndex.open(csv, src)
    assert sorted(os.listdir(src)) == before_listing


def test_same_size_edit_near_end_of_large_file_is_detected(tmp_path):
    # Bigger than head + tail windows, so only the tail hash can see an edit in the last row.
    src = tmp_path / "src"
    src.mkdir()
    csv = src / "big.csv"
    rows = [f"wavs/{i:06d}.wav|sentence number {i:06d}.|s" for i in range(6000)]
    csv.write_text("audio_file|text|speaker_name\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert csv.stat().st_size > 3 * 64 * 1024
    with CsvRowIndex.open(csv, tmp_path / "c") as index:
        assert index.built_now
    st = csv.stat()
    data = csv.read_bytes()
    csv.write_bytes(data[:-20] + data[-20:].replace(b"005999", b"LAST!!"))
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns))
    with CsvRowIndex.open(csv, tmp_path / "c") as index:
        assert index.built_now
        assert index.row_text(-1) == "wavs/005999.wav|sentence number LAST!!.|s"
