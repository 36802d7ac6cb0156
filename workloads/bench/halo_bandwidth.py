#!/usr/bin/env python3
"""halo3d large-halo exchange bandwidth against memcpy bandwidth, at 2 ranks.

Two ranks on one node exchange x-faces of 2 planes x NY x NZ doubles (3 fields
in the velocity phase, 1 in the pressure phase), with the blocking variant.
halo_bandwidth = bytes sent per rank / time in the exchange (pack, Sendrecv,
unpack). A same-node exchange is a memory copy at heart, so memcpy bandwidth,
measured here by libc memmove on buffers of the same size, is its physical
limit on one node. The exchange copies each byte at least three times (pack,
transfer, unpack), so about a third of memcpy is the practical ceiling."""
import ctypes
import statistics
import time

from _bench import measure, parser, setup


def memcpy_mb_s(nbytes: int, repeats: int = 20) -> float:
    src, dst = ctypes.create_string_buffer(nbytes), ctypes.create_string_buffer(nbytes)
    ctypes.memmove(dst, src, nbytes)  # fault the pages in first
    rates = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats):
            ctypes.memmove(dst, src, nbytes)
        rates.append(repeats * nbytes / (time.perf_counter() - t0) / 1e6)
    return statistics.median(rates)


def main():
    ap = parser(__doc__)
    ap.add_argument("--face", default="1024,1024", help="NY,NZ of the exchanged face")
    ap.add_argument("--iters", default="10")
    args = ap.parse_args()
    stack, bdir = setup(args)
    ny, nz = (int(x) for x in args.face.split(","))
    wargs = ["--n", f"4,{ny},{nz}", "--dims", "2,1,1", "--pml-width", "0", "--iters", args.iters,
             "--variant", "blocking", "--verify-max-points", "0"]
    m = measure(stack, bdir, "halo3d", wargs, 2, args.repeats,
                ["halo_bandwidth_avg", "halo_bandwidth_max", "halo_bytes_per_iter_avg", "comm_time_avg"])
    per_exchange = int(m["halo_bytes_per_iter_avg"] / 2)  # two exchanges (phases) per step
    mc = memcpy_mb_s(per_exchange)
    print(f"halo3d blocking, face {ny}x{nz}, {per_exchange / 1e6:.1f} MB per exchange on average, 2 ranks, "
          f"{stack.name}, median of {args.repeats}")
    print(f"memcpy (libc memmove, same size):  {mc:9.0f} MB/s  1.00x")
    print(f"halo exchange, mean over ranks:    {m['halo_bandwidth_avg']:9.0f} MB/s  {m['halo_bandwidth_avg'] / mc:.2f}x")
    print(f"halo exchange, fastest rank:       {m['halo_bandwidth_max']:9.0f} MB/s  {m['halo_bandwidth_max'] / mc:.2f}x")


if __name__ == "__main__":
    main()
