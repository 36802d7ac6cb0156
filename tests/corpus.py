"""Corpora of distinct runs made from the real fixtures, for tests and benchmarks."""
from __future__ import annotations

from pathlib import Path


def varied_copies(src: Path, n: int, outdir: Path) -> list[Path]:
    """Real profiles with one Adiak value (the user) varied, so each is a distinct run."""
    data = src.read_bytes()
    assert data.count(b"data=root,") >= 1, f"{src}: no Adiak user value to vary"
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        f = outdir / f"copy-{i:06d}.cali"
        f.write_bytes(data.replace(b"data=root,", f"data=u{i:06d},".encode()))
        out.append(f)
    return out
