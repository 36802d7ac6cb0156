"""Corpora of distinct runs made from the real fixtures, for tests and benchmarks."""
from __future__ import annotations

from pathlib import Path


def varied_copies(src: Path, n: int, outdir: Path, value: str = "root") -> list[Path]:
    """Real profiles with one metadata value (by default Adiak's user, `root`) varied, so each is a
    distinct run."""
    data = src.read_bytes()
    old = f"data={value},".encode()
    assert data.count(old) >= 1, f"{src}: no metadata value {value!r} to vary"
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        f = outdir / f"copy-{i:06d}.cali"
        f.write_bytes(data.replace(old, f"data={value}{i:06d},".encode()))
        out.append(f)
    return out
