#!/usr/bin/env python3
"""The one Python reader of dfccl-harness HDF5 files (layout: docs/hdf5-layout.md, section "Reading the files from
Python"). Every script that reads a harness file goes through it (plot_harness.py, compare_table.py, results_doc.py).

    import dfccl_results as dr
    df = dr.cases(["results/gpu/sweep-2xH200.h5"])       # every row of /backends/*/collectives, one DataFrame
    df[(df.backend == "nccl") & (df.coll == "all_reduce")][["bytes", "busbw_GBs"]]
    dr.trials(paths), dr.summary(paths)                  # /backends/*/trials and /summary rows, same run columns
    dr.hops(paths), dr.rank_hosts(path)                  # ring hops per backend (rank, peer, transport), hosts
    dr.faults(paths)                                     # fault workloads: per trial victim, detect/shrink/recover
    dr.iterations(path, "dfccl")                         # per-iteration times of one backend
    dr.run_attributes(path)                              # every root attribute, as a dict

Each table carries the run's provenance as columns (RUN_COLUMNS: file, git revision, date, host, GPUs, ...) and, for
per-backend tables, the backend's attributes (BACKEND_COLUMNS). Needs h5py, numpy and pandas (Debian: python3-h5py,
python3-pandas; scripts/python.sh picks an interpreter that has them). Files may be partial (status `running` or an
error): every row present is returned.

Command line: scripts/python.sh scripts/dfccl_results.py FILE.h5 [...] [--table cases|trials|summary|hops|faults]
[--csv]
prints the table.
"""
import argparse
import os
import sys

import h5py
import numpy as np
import pandas as pd

TOOL = "dfccl-harness"
# Files of the same layout family that this reader also takes: the PyTorch workloads' (workloads/pytorch; /summary and
# /backends/<backend>/steps, docs/hdf5-layout.md "dfccl-torch").
TOOLS = (TOOL, "dfccl-torch")
# Root attributes that every table carries, as (column, attribute). `nranks` and `status` are renamed because the
# per-row tables have columns of those names.
RUN_ATTRS = [("workload", "workload"), ("workload_kind", "workload_kind"), ("git_revision", "git_revision"),
             ("date_utc", "date_utc"), ("hostname", "hostname"), ("gpus", "gpus"), ("world_nranks", "nranks"),
             ("layout", "layout"), ("dfccl_version", "dfccl_version"), ("nccl_version", "nccl_version"),
             ("driver_version", "driver_version"), ("file_status", "status")]
# `file` (base name), `path` (as given) come first; `gpu` (gpu_summary of `gpus`) and `nhosts` (the root attribute;
# in files before layout 3, the hosts named by `hostname`) last.
RUN_COLUMNS = ["file", "path"] + [c for c, _ in RUN_ATTRS] + ["gpu", "nhosts"]
BACKEND_COLUMNS = ["backend", "executor", "mode", "completion", "available"]


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _value(v):
    """An attribute's value as a Python str, int or float."""
    v = _text(v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray) and v.size == 1:
        return _value(v.reshape(-1)[0])
    return v


def _paths(paths):
    """paths as a list: one path (str or os.PathLike) or an iterable of them."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise ValueError("dfccl_results: no file given")
    return out


def _open(path):
    """The open harness file at path; FileNotFoundError or ValueError (naming the file) otherwise."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dfccl_results: {path}: no such file")
    f = h5py.File(path, "r")
    tool = _text(f.attrs.get("tool", ""))
    if tool not in TOOLS:
        f.close()
        raise ValueError(f"dfccl_results: {path}: not a {TOOL} file (root attribute tool = {tool!r})")
    return f


def read_group(group):
    """A table group (docs/hdf5-layout.md: one 1-D dataset per column) as a DataFrame; strings as str."""
    cols = {}
    for name, ds in group.items():
        v = ds[()]
        if v.dtype.kind in "OS":
            v = np.array([_text(x) for x in v], dtype=object)
        cols[name] = v
    return pd.DataFrame(cols)


def gpu_summary(gpus):
    """The `gpus` attribute (one `host: device N name (pci)` line per rank) in short: `2x NVIDIA H200`, `no GPU`;
    ranks that share a device count it once."""
    devices, names = set(), []
    for line in str(gpus or "").splitlines():
        host, _, rest = line.partition(": ")
        if not rest.startswith("device "):
            continue
        name = rest.split(" ", 2)[2] if rest.count(" ") >= 2 else rest
        pci = name.rsplit(" (", 1)[1] if " (" in name else name
        name = name.rsplit(" (", 1)[0]
        if (host, pci) not in devices:
            devices.add((host, pci))
            names.append(name)
    if not names:
        return "no GPU"
    return ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names))


def run_attributes(path):
    """Every root attribute of the harness file at path, as {name: str, int or float}."""
    with _open(os.fspath(path)) as f:
        return {k: _value(v) for k, v in f.attrs.items()}


def _run_columns(path, attrs, extra):
    cols = {"file": os.path.basename(path), "path": path}
    for col, name in RUN_ATTRS:
        cols[col] = attrs.get(name, "")
    cols["gpu"] = gpu_summary(attrs.get("gpus", ""))
    cols["nhosts"] = int(attrs["nhosts"]) if "nhosts" in attrs else len(
        [h for h in str(attrs.get("hostname", "")).split(",") if h])
    for name in extra:
        cols[name] = attrs.get(name, "")
    return cols


def _backend_columns(group):
    attrs = {k: _value(v) for k, v in group.attrs.items()}
    return {c: attrs.get(c, "") for c in BACKEND_COLUMNS}


def _with_columns(df, cols):
    """df with the constant columns cols placed first."""
    front = pd.DataFrame({k: np.repeat(np.array([v]), len(df)) for k, v in cols.items()}, index=df.index)
    return pd.concat([front, df.drop(columns=[c for c in cols if c in df.columns])], axis=1)


def _backend_table(path, table, backends, extra):
    """The rows of /backends/<b>/<table> for each backend b of the file (in run order), with run and backend
    columns and `row`, the row's index in its table."""
    frames = []
    with _open(path) as f:
        attrs = {k: _value(v) for k, v in f.attrs.items()}
        run = _run_columns(path, attrs, extra)
        group = f.get("backends", {})
        order = [b for b in str(attrs.get("backends", "")).split(",") if b in group]
        order += [b for b in group if b not in order]
        for b in order:
            if (backends and b not in backends) or table not in group[b]:
                continue
            df = read_group(group[b][table])
            df.insert(0, "row", np.arange(len(df), dtype=np.int64))
            if table == "collectives" and "in_place" not in df.columns:  # files written before the column: 0
                df.insert(len(df.columns), "in_place", np.zeros(len(df), dtype=np.int64))
            frames.append(_with_columns(df, {**run, **_backend_columns(group[b]), "backend": b}))
    return frames


def concat(frames, columns=()):
    """The tables frames (of this module) as one; empty ones count only where all are (their dtypes would turn integer
    columns to float); a table of the given columns where there is none."""
    full = [f for f in frames if len(f)]
    if full or frames:
        return pd.concat(full or frames[:1], ignore_index=True)
    return pd.DataFrame(columns=columns)


def cases(paths, backends=None, extra_attrs=()):
    """Every case row (/backends/<backend>/collectives) of the harness files at paths (one path or several), in file
    and run order, as one DataFrame: RUN_COLUMNS, BACKEND_COLUMNS, `row` (index in its collectives table), then the
    table's columns (coll, bytes, in_place (0 in files written before it), time_median_us, busbw_GBs, ...). backends: only these (names); extra_attrs: more root
    attributes to add as columns. Raises FileNotFoundError / ValueError naming a missing or non-harness file."""
    frames = []
    for p in _paths(paths):
        frames += _backend_table(p, "collectives", backends, extra_attrs)
    return concat(frames, RUN_COLUMNS + BACKEND_COLUMNS + ["row"])


def variant(df, in_place=False):
    """The rows of a cases() table measured out-of-place (in_place=False) or in-place (True): nccl-tests' two
    measurements of a size are two rows (column in_place 0/1); a comparison per size compares like with like."""
    return df[df["in_place"] == int(in_place)]


def trials(paths, backends=None, extra_attrs=()):
    """Every trial row (/backends/<backend>/trials: case, trial, status, elapsed_s, ...) of the files, with the same
    leading columns as cases()."""
    frames = []
    for p in _paths(paths):
        frames += _backend_table(p, "trials", backends, extra_attrs)
    return concat(frames, RUN_COLUMNS + BACKEND_COLUMNS + ["row"])


def summary(paths, extra_attrs=()):
    """The /summary rows (one per backend: trials, completed, deadlocked, wrong, deadlock_rate, ci_low, ...) of the
    files, with RUN_COLUMNS first."""
    frames = []
    for p in _paths(paths):
        with _open(p) as f:
            attrs = {k: _value(v) for k, v in f.attrs.items()}
            if "summary" in f:
                frames.append(_with_columns(read_group(f["summary"]), _run_columns(p, attrs, extra_attrs)))
    return concat(frames, RUN_COLUMNS + ["backend"])


def steps(paths, backends=None, extra_attrs=()):
    """Every step row (/backends/<backend>/steps: step, warmup, time_s, loss, wrong) of dfccl-torch files, with the
    same leading columns as cases()."""
    frames = []
    for p in _paths(paths):
        frames += _backend_table(p, "steps", backends, extra_attrs)
    return concat(frames, RUN_COLUMNS + BACKEND_COLUMNS + ["row"])


def hops(paths, backends=None, extra_attrs=()):
    """Every ring hop (/backends/<backend>/hops: group, rank, peer, transport, host, peer_host; layout 3, dfccl
    backends) of the files, with the same leading columns as cases(); none for older files and for nccl."""
    frames = []
    for p in _paths(paths):
        frames += _backend_table(p, "hops", backends, extra_attrs)
    return concat(frames, RUN_COLUMNS + BACKEND_COLUMNS + ["row"])


def faults(paths, backends=None, extra_attrs=()):
    """Every trial of the fault workloads among the files (/backends/<backend>/faults: trial, status, victim, kill_ms,
    detect_s, shrink_s, recover_s, lost, wrong, survivors, resumed_at), with the same leading columns as cases(); none
    for other workloads."""
    frames = []
    for p in _paths(paths):
        frames += _backend_table(p, "faults", backends, extra_attrs)
    return concat(frames, RUN_COLUMNS + BACKEND_COLUMNS + ["row"])


def rank_hosts(path):
    """Each rank's host (root attribute `hosts`, layout 3), as a list indexed by world rank; [] in older files."""
    return [h for h in str(run_attributes(path).get("hosts", "")).split("\n") if h]


def iterations(path, backend):
    """/backends/<backend>/iterations of the file (row, iteration, time_us): the per-iteration times behind each case
    row (`row` indexes cases(path, [backend]))."""
    with _open(os.fspath(path)) as f:
        key = f"backends/{backend}/iterations"
        if key not in f:
            raise ValueError(f"dfccl_results: {path}: no backend {backend!r} with iterations "
                             f"(backends: {', '.join(f.get('backends', {}))})")
        return read_group(f[key])


UNITS = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))


def parse_size(s):
    """`8`, `64K`, `1M`, `1G` (binary units) as bytes; ValueError naming the text otherwise."""
    s = str(s).strip()
    scale = dict(UNITS).get(s[-1:].upper(), 1)
    digits = s[:-1] if scale > 1 else s
    if not digits.isdigit():
        raise ValueError(f"dfccl_results: size {s!r}: expected a number with an optional K, M or G")
    return int(digits) * scale


def size_label(n):
    """n bytes as an axis label: `8`, `1K`, `64K`, `1M`, `1G`, `1.5M` (binary units)."""
    n = float(n)
    for unit, f in UNITS:
        if n >= f:
            return f"{n / f:.3g}{unit}"
    return f"{n:.3g}"


def human_bytes(n):
    """n bytes as a table cell: `1 GiB`, `64 KiB`, `12 B` (whole binary units only)."""
    n = int(n)
    for u, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return f"{n // f} {u}"
    return f"{n} B"


def provenance(run):
    """One line on where a run's numbers come from, for a figure's footer: file, version and commit, ranks, machine
    and GPUs, date. run: a row of any table here (its RUN_COLUMNS)."""
    date = str(run.get("date_utc", "?")).replace("T", " ").rstrip("Z")
    return (f"{run.get('file', '?')}: dfccl {run.get('dfccl_version', '?')} @ {run.get('git_revision', '?')}, "
            f"{run.get('world_nranks', '?')} ranks on {run.get('hostname', '?')} ({run.get('gpu', '?')}), {date} UTC")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--table", choices=["cases", "trials", "summary", "steps", "hops", "faults"], default="cases")
    ap.add_argument("--csv", action="store_true", help="CSV instead of a text table")
    a = ap.parse_args()
    try:
        df = {"cases": cases, "trials": trials, "summary": summary, "steps": steps, "hops": hops,
              "faults": faults}[a.table](a.files)
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    if a.csv:
        df.to_csv(sys.stdout, index=False)
    else:
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(df.drop(columns=["path", "gpus"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
