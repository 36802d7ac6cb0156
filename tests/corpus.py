"""Corpora of distinct runs made from the real fixtures, for tests and benchmarks."""
from __future__ import annotations

import re
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


def copy_to_ranks(src: Path, n: int, dst: Path) -> Path:
    """SRC's rank-0 records repeated for ranks 0..N-1 (every other line kept as it is)."""
    lines = src.read_bytes().split(b"\n")
    rank_attr = next(re.search(rb"id=(\d+),", ln).group(1) for ln in lines
                     if ln.startswith(b"__rec=node") and b"data=mpi.rank," in ln)
    head, rank0, tail = [], [], []
    for ln in lines:
        if ln.startswith(b"__rec=ctx"):
            attrs = re.search(rb"attr=([\d=]+)", ln).group(1).split(b"=")
            data = re.search(rb"data=([^,]*)", ln).group(1).split(b"=")
            if rank_attr in attrs and data[attrs.index(rank_attr)] == b"0":
                rank0.append((ln, attrs.index(rank_attr)))
        elif ln.startswith(b"__rec=globals"):
            tail.append(ln)
        elif ln:
            head.append(ln)
    with dst.open("wb") as f:
        f.write(b"\n".join(head) + b"\n")
        for r in range(n):
            rb = str(r).encode()
            for ln, i in rank0:
                pre, data, post = re.split(rb"(data=[^,]*)", ln, maxsplit=1)
                values = data[5:].split(b"=")
                values[i] = rb
                f.write(pre + b"data=" + b"=".join(values) + post + b"\n")
        f.write(b"\n".join(tail) + b"\n")
    return dst
