#!/usr/bin/env python3
"""The collective tuning advisor, end to end on one stack: sweep, advise, then
the tuned library against its defaults, on collsweep and on cgsolve.

1. Sweep: collsweep once per algorithm (forced through the stack's control,
   as coll_algorithms.py does), each after a run with the defaults,
   --sweep-repeats times, each stdout kept under --out/sweep.
2. Advise: `commscope advise collectives` on those files writes the stack's
   tuning input under --out/tuning (Open MPI rules file, MPICH selection
   JSON, Intel MPI I_MPI_ADJUST strings) and prints the predicted gain.
3. Validate: default and tuned runs alternate --repeats times: collsweep on
   the same collectives and sizes, and cgsolve (textbook CG, two 8-byte
   Allreduces per iteration). Reported: the median of each figure,
   default/tuned (>1 = the tuning wins), and the verdict of the regression
   gate's own test (`commscope check`: one-sided Mann-Whitney at --alpha over
   the runs, and an effect of at least --min-effect): `wins`, `LOSES`, or
   `no measurable difference`. One launch's latency here can differ 2x from
   the next launch of the same binary, so a ratio of medians over a few runs
   alone does not say which is faster. A tuning that loses is printed as such
   and stored as such.
4. With --store, the advice is written to the `advice` table (kind
   'collectives') with predicted and measured figures, through COMMSCOPE_DB_URL
   or the embedded server.
"""
import statistics
import sys
from pathlib import Path

from _bench import parser, setup
import suite  # noqa: E402  (on the path once _bench is imported)
from coll_algorithms import algorithms  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from commscope.advise import collectives as ac
from commscope.gate import regressions  # noqa: E402

# Intel MPI presets have no names here; the valid ranges are in workloads/README.md.
IMPI_PRESETS = {"allreduce": 12, "bcast": 12, "reduce": 10, "allgather": 6, "alltoall": 6, "barrier": 8}


def sweep_envs(stack, coll, ranks, max_presets):
    if stack.family == "impi":
        return [(str(i), {f"I_MPI_ADJUST_{coll.upper()}": str(i)})
                for i in range(1, min(IMPI_PRESETS[coll], max_presets) + 1)]
    return algorithms(stack, coll, ranks)


def mpich_library(stack) -> Path | None:
    """The shared library whose own selection tree the MPICH tuning file extends."""
    if stack.family != "mpich":
        return None
    lib = (Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12") if stack.name.startswith("debian")
           else Path(stack.prefix) / "lib" / "libmpi.so.12")
    if not lib.exists():
        sys.exit(f"bench: {lib}: no MPICH library for {stack.name}")
    return lib


def run_ok(stack, bdir, workload, args, ranks, env):
    r = suite.run(stack, bdir, workload, args, ranks, env=env, timeout=600)
    return r, suite.problems(r)


def sweep(stack, bdir, args, outdir):
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.out"):  # an earlier sweep's runs would join this one's
        old.unlink()
    base = ["--iters", str(args.iters)]
    for rep in range(args.sweep_repeats):
        for coll in args.coll.split(","):
            # The default runs before every forced algorithm, so it gets as many launches as all of them together:
            # one launch here can be 2x slower than the next, and an algorithm replaces the default only if its
            # slowest run beats the default's fastest (advise_collectives.choose).
            runs = []
            for k, (label, env) in enumerate(sweep_envs(stack, coll, args.ranks, args.max_presets)):
                runs += [(f"default-{k}", {}), (label, env)]
            for label, env in runs:
                r, bad = run_ok(stack, bdir, "collsweep", ["--coll", coll, "--sizes", args.sizes] + base, args.ranks, env)
                if not bad:
                    (outdir / f"{coll}-{label}-{rep}.out").write_text(r.stdout)
                    continue
                if label.startswith("default"):
                    sys.exit(f"bench: collsweep {coll} failed with the defaults: {'; '.join(bad)}")
                # Some size cannot run this algorithm: keep the sizes that can.
                for s in args.sizes_list:
                    r, bad = run_ok(stack, bdir, "collsweep", ["--coll", coll, "--sizes", str(s)] + base,
                                    args.ranks, env)
                    if not bad:
                        (outdir / f"{coll}-{label}-{s}B-{rep}.out").write_text(r.stdout)
            print(f"  swept {coll} (round {rep + 1})", flush=True)


def validate(stack, bdir, args, tuned_env):
    """Alternating default and tuned runs; {figure: {"default": [...], "tuned": [...]}}, one value per run."""
    figs = {}
    coll_args = ["--coll", args.coll, "--sizes", args.sizes, "--iters", str(args.iters)]
    cg_args = suite.CGSOLVE + ["--allreduce", "direct"]
    for _ in range(args.repeats):
        for which, env in (("default", {}), ("tuned", tuned_env)):
            r, bad = run_ok(stack, bdir, "collsweep", coll_args, args.ranks, env)
            if bad:
                sys.exit(f"bench: collsweep ({which}) failed: {'; '.join(bad)}")
            for coll in args.coll.split(","):
                sizes = [0] if coll == "barrier" else args.sizes_list
                for s in sizes:
                    name = "barrier_t_avg" if coll == "barrier" else f"{coll}_{s}B_t_avg"
                    figs.setdefault(("collsweep", coll, s), {"default": [], "tuned": []})[which].append(
                        r.out.foms[name][0])
            r, bad = run_ok(stack, bdir, "cgsolve", cg_args, args.ranks, env)
            if bad:
                sys.exit(f"bench: cgsolve ({which}) failed: {'; '.join(bad)}")
            for f in ("allreduce_time_avg", "total_time"):
                figs.setdefault(("cgsolve", f, 0), {"default": [], "tuned": []})[which].append(r.out.foms[f][0])
    return figs


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.2g}"  # None: fewer than 3 runs a side, no test


def judged(default: list, tuned: list, args) -> dict:
    """Medians, default/tuned, and the gate's verdict on tuned against default (times: larger is worse)."""
    verdict, effect, p = regressions.compare(tuned, default, args.min_effect, args.alpha)
    d, t = statistics.median(default), statistics.median(tuned)
    return {"default": d, "tuned": t, "speedup": d / t, "runs": len(tuned), "p": p,
            "verdict": {"regression": "LOSES", "improvement": "wins"}.get(verdict, "no measurable difference")}


def load():
    return Path("/proc/loadavg").read_text().split()[0]


def main():
    ap = parser(__doc__)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--coll", default="allreduce,bcast", help="collectives to tune (cgsolve uses Allreduce)")
    ap.add_argument("--sizes", default="8:256K", help="collsweep --sizes of the sweep and the validation")
    ap.add_argument("--iters", type=int, default=200, help="collsweep --iters")
    ap.add_argument("--sweep-repeats", type=int, default=2)
    ap.add_argument("--max-presets", type=int, default=8, help="Intel MPI: presets 1..N per collective")
    ap.add_argument("--out", type=Path, default=Path("build/tuned_vs_default"))
    ap.add_argument("--store", action="store_true", help="record the advice with its measured speedup in the store")
    ap.add_argument("--alpha", type=float, default=0.05, help="significance of the tuned-vs-default test")
    ap.add_argument("--min-effect", type=float, default=0.05, help="smallest relative difference that counts")
    args = ap.parse_args()
    stack, bdir = setup(args)
    lo, hi = (ac_size(x) for x in args.sizes.split(":")) if ":" in args.sizes else (None, None)
    args.sizes_list = ([lo << k for k in range(64) if lo << k <= hi] if lo else [ac_size(x) for x in args.sizes.split(",")])
    out = args.out / f"{stack.name}-n{args.ranks}"
    print(f"tuned vs default collectives, {stack.name}, {args.ranks} ranks, load average {load()} at start")
    sweep(stack, bdir, args, out / "sweep")
    t_list = ac.choose(ac.points_from_files([out / "sweep"], stack.name))
    tuning = t_list[0]
    written = ac.write([ac.render(tuning, out / "tuning", mpich_library(stack))], out / "tuning")[0]
    print("\n".join(ac.describe(tuning)))
    print("tuning input: " + " ".join(f"{k}='{v}'" for k, v in written["env"].items()))
    if not any(tuning.tuned_bands().values()):
        print("no band beats the default: the tuning equals the defaults, nothing to validate")
        measured = {}
    else:
        figs = validate(stack, bdir, args, written["env"])
        print(f"\n{'workload':9} {'figure':22} {'bytes':>8} {'default':>12} {'tuned':>12} {'default/tuned':>14}"
              f"  verdict (p)")
        measured = {}
        per_coll: dict = {}
        for (w, f, s), v in sorted(figs.items()):
            unit = "us" if w == "collsweep" else "s"
            j = judged(v["default"], v["tuned"], args)
            print(f"{w:9} {f:22} {s:8} {j['default']:10.4g}{unit:>2} {j['tuned']:10.4g}{unit:>2} {j['speedup']:14.2f}"
                  f"  {j['verdict']} ({_p(j['p'])})")
            if w == "collsweep":
                # per run, the sum over sizes
                pc = per_coll.setdefault(f, {"default": [0.0] * len(v["default"]), "tuned": [0.0] * len(v["tuned"])})
                for which in ("default", "tuned"):
                    pc[which] = [a + b for a, b in zip(pc[which], v[which])]
            else:
                measured[f"cgsolve {f}"] = j
        for coll, v in per_coll.items():
            measured[f"collsweep {coll} (sum over sizes, us)"] = judged(v["default"], v["tuned"], args)
        print()
        for name, m in measured.items():
            print(f"{name}: default/tuned = {m['speedup']:.3f} over {m['runs']} runs each: "
                  f"{'TUNED LOSES to the default' if m['verdict'] == 'LOSES' else 'tuned ' + m['verdict']}"
                  f" (p = {_p(m['p'])})")
        pred = tuning.predicted()
        print("predicted (from the sweep): " + ", ".join(f"{c} {p['speedup']:.2f}x" for c, p in pred.items()))
    print(f"load average {load()} at the end")
    if args.store:
        from commscope.store import db
        with db.connect() as conn:
            aid = ac.store(conn, tuning, f"workloads/bench/tuned_vs_default.py {stack.name} n{args.ranks}", written,
                           measured)
            conn.commit()
        print(f"stored as advice {aid}")


def ac_size(text: str) -> int:
    text = text.strip().upper().rstrip("B")
    mult = {"K": 1024, "M": 1 << 20}.get(text[-1:], 1)
    return int(text[:-1] if mult > 1 else text) * mult


if __name__ == "__main__":
    main()
