"""`commscope advise`: placement, barriers, collectives and overlap advice from profiles or the store."""
from __future__ import annotations

from pathlib import Path

import click
import psycopg

from commscope.commands.common import fail, permission_denied, not_stored
from commscope.store import db


@click.group("advise")
def advise_group():
    """Turn the stored data into actions, as the reference studies did."""


def _store_advice(write) -> None:
    """write(conn) in one transaction; a store that fails, or a role that may not write, says how to only
    print the advice (printed before this)."""
    try:
        with db.connect() as conn:
            write(conn)
            conn.commit()
    except db.DBError as e:
        fail(f"{e} (use --no-store to only print the advice)")
    except psycopg.errors.InsufficientPrivilege as e:
        not_stored("advise", ["advice"], e, "the advice above was printed but not stored",
                   "use --no-store to only print it, or run it as the commscope role or one made by "
                   "`commscope db grant-writer`")


@advise_group.command("placement")
@click.argument("source")
@click.option("--topology", "topology_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML: nodes, ranks_per_node, network (flat, fat-tree, torus, hypercube)")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="write the rankfile, host lists and rank map into this directory")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_placement(source, topology_file, output, no_store):
    """Rank-to-node placement from the communication matrix of SOURCE: a stored run id, or a message-tracing profile.
    A run traced under commgraph --rank-map gets a commgraph.rank-map composed with the application rank each world
    rank played (its RANK lines; for a stored run, read again from its source files)."""
    from commscope.advise import placement
    from commscope.read import files, profiles

    try:
        topo = placement.Topology.from_dict(files.load_yaml(topology_file, what="a topology (YAML)"),
                                            str(topology_file))
        run = placement.traced(source)
        p = placement.optimize(run.matrix, run.ranks, topo)
    except (placement.BadTopology, profiles.BadProfile, LookupError) as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))
    ranks, run_id, app_rank_of, unknown_map = run.ranks, run.run_id, run.app_rank_of, run.no_rank_map
    files = placement.launcher_files(p, topo, app_rank_of)
    if unknown_map:
        files.pop("commgraph.rank-map", None)
    rnd_i, rnd_h = p.random_mean
    lines = [f"placement of {ranks} ranks on {topo.nodes} nodes x {topo.ranks_per_node} ({topo.kind}), {p.method}",
             f"{'':12}{'inter-node bytes':>18}{'hop-bytes':>16}",
             f"{'default':12}{p.default[0]:>18,}{p.default[1]:>16,}",
             f"{'random':12}{rnd_i:>18,.0f}{rnd_h:>16,.0f}",
             f"{'optimized':12}{p.optimized[0]:>18,}{p.optimized[1]:>16,}",
             "node of each rank: " + " ".join(topo.hosts[n] for n in p.node_of)]
    if app_rank_of:
        lines.append("application rank each traced world rank played: " + " ".join(map(str, app_rank_of)))
    if unknown_map:
        lines.append(unknown_map)
    click.echo("\n".join(lines))
    if output:
        output.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (output / name).write_text(text)
        click.echo(f"wrote {', '.join(sorted(files))} to {output}")
    if not no_store:
        summary = {"ranks": ranks, "nodes": topo.nodes, "ranks_per_node": topo.ranks_per_node, "network": topo.kind,
                   "method": p.method, "node_of": p.node_of, "default": p.default, "optimized": p.optimized,
                   "random_mean": p.random_mean, "app_rank_of": app_rank_of}
        text = placement.advice_text([topo.hosts[n] for n in p.node_of], p.default, p.optimized, rnd_h)
        _store_advice(lambda conn: db.insert_advice(conn, "placement", run_id, source, summary, text))


@advise_group.command("barriers")
@click.argument("source")
@click.option("--fastest", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="measure the saving on this share of the runs, the fastest of each side (on a loaded machine)")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_barriers(source, fastest, no_store):
    """Barrier time, likely debugging barriers and the predicted saving of SOURCE: a stored run id, campaign:ID
    (runs that differ only in the debug-barrier switch are compared), or a profile file. Needs call counts
    (region.count; commscope run --caliper counts)."""
    from commscope.advise import barriers as ab
    from commscope.read import profiles
    try:
        if Path(source).exists():
            advice, skipped = [ab.from_profile_path(source)], []
        else:
            with db.connect() as conn:
                advice, skipped = ab.from_store(conn, source, fastest)
    except (LookupError, profiles.BadProfile) as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        fail(permission_denied(e, "advise barriers", ": no advice"))
    for note in skipped:
        click.echo(f"skipped {note}")
    for a in advice:
        click.echo(f"{'run ' + str(a.run_id) if a.run_id else a.source}: {a.text}")
    if not no_store:
        _store_advice(lambda conn: ab.store(conn, advice))


@advise_group.command("collectives")
@click.argument("source", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), default=Path("tuning"),
              show_default=True, help="directory for each stack's tuning file and its .env")
@click.option("--stack", help="stack name for output files (files only; default: from the MPI library line)")
@click.option("--mpich-library", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="the MPICH shared library to tune (its own selection tree fills what is not tuned)")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_collectives(source, output, stack, mpich_library, no_store):
    """Best collective algorithm per message-size band from a collsweep sweep, as each stack's tuning input.

    SOURCE is a stored campaign id, or collsweep stdout files and directories."""
    from commscope.advise import collectives as ac
    try:
        if len(source) == 1 and source[0].isdigit():
            with db.connect() as conn:
                points = ac.points_from_store(conn, int(source[0]))
        else:
            points = ac.points_from_files([Path(s) for s in source], stack)
        tunings = ac.choose(points)
        written = ac.write([ac.render(t, output, mpich_library) for t in tunings], output)
    except ac.BadInput as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))
    for t, w in zip(tunings, written):
        click.echo("\n".join(ac.describe(t)))
        click.echo("  enable with: " + " ".join(f"{k}='{v}'" for k, v in w["env"].items()))
    def store(conn):
        for t, w in zip(tunings, written):
            ac.store(conn, t, " ".join(source), w)
    if not no_store:
        _store_advice(store)


@advise_group.command("overlap")
@click.argument("source")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_overlap(source, no_store):
    """Exposed communication, overlap efficiency against blocking, the Irecv gap, and per region the imbalance and
    whether waiting comes from imbalance or the network, over each run's focus window (its loop), for SOURCE: a
    stored run id or campaign:ID."""
    from commscope.advise import overlap as ao
    try:
        with db.connect() as conn:
            results, skipped = ao.from_store(conn, source)
            for note in skipped:
                click.echo(f"skipped {note}")
            click.echo(ao.table(results))
            for o in results:
                click.echo(f"run {o.run_id}: {o.text()}")
            if not no_store:
                ao.store(conn, source, results)
                conn.commit()
    except LookupError as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))

