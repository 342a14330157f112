#!/usr/bin/env python3
"""scripts/dfccl_results.py, compare_table.py and plot_harness.py on the committed files in results/ (values from
results/gpu/sweep-2xH200.h5, run 80). Usage: scripts/python.sh tests/scripts/results_reader_test.py [-v]"""
import glob
import os
import subprocess
import sys
import tempfile
import unittest

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import compare_table  # noqa: E402
import dfccl_results as dr  # noqa: E402
import pandas as pd  # noqa: E402
import plot_harness  # noqa: E402

SWEEP = os.path.join(ROOT, "results/gpu/sweep-2xH200.h5")
STRESS_NCCL = os.path.join(ROOT, "results/gpu/stress-nccl-2xH200.h5")
HOST_SWEEP = os.path.join(ROOT, "results/host/sweep-host-8ranks.h5")
PNG = b"\x89PNG\r\n\x1a\n"


def tool(path):
    with h5py.File(path, "r") as f:
        t = f.attrs.get("tool", "")
        return t.decode() if isinstance(t, bytes) else t


def rows_in_file(path, table):
    """Rows of /backends/*/<table>, counted with h5py alone."""
    with h5py.File(path, "r") as f:
        return sum(len(g[table]["case"]) for g in f["backends"].values() if table in g)


class SweepFile(unittest.TestCase):
    def setUp(self):
        self.df = dr.cases(SWEEP)

    def test_rows_and_run_columns(self):
        self.assertEqual(len(self.df), 280)
        self.assertEqual(self.df.groupby("backend").size().to_dict(), {"dfccl": 140, "nccl": 140})
        self.assertEqual(set(self.df["coll"]), {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"})
        run = self.df.iloc[0]
        self.assertEqual((run["git_revision"], run["date_utc"], run["hostname"]), ("fa9b6e9", "2026-12-01T00:43:52Z",
                                                                                     "vm"))
        self.assertEqual((run["gpu"], run["world_nranks"], run["nccl_version"]), ("2x NVIDIA H200", 2, "2.28.9"))
        self.assertEqual(run["file"], "sweep-2xH200.h5")
        self.assertEqual(list(self.df["backend"].drop_duplicates()), ["dfccl", "nccl"])
        self.assertEqual(set(self.df[self.df["backend"] == "nccl"]["executor"]), {"cuda"})

    def test_known_busbw(self):
        big = self.df[(self.df["coll"] == "all_reduce") & (self.df["bytes"] == 1 << 30)].set_index("backend")
        self.assertAlmostEqual(big.loc["dfccl", "busbw_GBs"], 360.459, places=2)
        self.assertAlmostEqual(big.loc["nccl", "busbw_GBs"], 326.804, places=2)
        self.assertAlmostEqual(big.loc["nccl", "time_median_us"], 3285.58, places=1)

    def test_iterations_index_cases(self):
        it = dr.iterations(SWEEP, "dfccl")
        self.assertEqual(len(it), 5600)
        self.assertEqual(it["row"].max(), 139)
        self.assertEqual(sorted(set(self.df[self.df["backend"] == "dfccl"]["row"])), list(range(140)))
        with self.assertRaisesRegex(ValueError, "no backend 'host'"):
            dr.iterations(SWEEP, "host")

    def test_run_attributes(self):
        a = dr.run_attributes(SWEEP)
        self.assertEqual((a["tool"], a["backends"], a["nranks"]), ("dfccl-harness", "dfccl,nccl", 2))
        self.assertIn("kind = 'sweep'", a["config"])


class SeveralFiles(unittest.TestCase):
    def test_every_harness_file_in_results(self):
        paths = sorted(glob.glob(os.path.join(ROOT, "results/**/*.h5"), recursive=True))
        harness = [p for p in paths if tool(p) == "dfccl-harness"]
        self.assertGreaterEqual(len(harness), 25)
        df, trials = dr.cases(harness), dr.trials(harness)
        self.assertEqual(len(df), sum(rows_in_file(p, "collectives") for p in harness))
        self.assertEqual(len(trials), sum(rows_in_file(p, "trials") for p in harness))
        self.assertEqual(set(df["path"]) | set(dr.summary(harness)["path"]), set(harness))
        self.assertEqual(str(df["world_nranks"].dtype), "int64")
        for p in paths:
            if tool(p) == "dfccl-torch":  # a PyTorch workload's file: steps and a summary, no cases
                self.assertTrue(dr.cases(p).empty, p)
                self.assertGreater(len(dr.steps(p)), 0, p)
            elif p not in harness:
                with self.assertRaisesRegex(ValueError, "not a dfccl-harness file"):
                    dr.cases(p)

    def test_trials_and_summary(self):
        t = dr.trials([SWEEP, STRESS_NCCL])
        self.assertEqual(len(t), 300)
        stress = t[t["file"] == "stress-nccl-2xH200.h5"]
        self.assertEqual(stress["status"].value_counts().to_dict(), {"deadlocked": 19, "completed": 1})
        s = dr.summary([SWEEP, STRESS_NCCL]).set_index(["file", "backend"])
        self.assertEqual(s.loc[("stress-nccl-2xH200.h5", "nccl"), "deadlocked"], 19)
        self.assertEqual(s.loc[("sweep-2xH200.h5", "dfccl"), "trials"], 140)
        self.assertEqual(s.loc[("stress-nccl-2xH200.h5", "nccl"), "git_revision"], "3ec3698-dirty")

    def test_bad_input(self):
        with self.assertRaisesRegex(FileNotFoundError, "nope.h5: no such file"):
            dr.cases("nope.h5")
        with self.assertRaisesRegex(ValueError, "no file given"):
            dr.cases([])
        with self.assertRaisesRegex(ValueError, "size '1X'"):
            dr.parse_size("1X")


class Sizes(unittest.TestCase):
    def test_labels(self):
        self.assertEqual([dr.size_label(n) for n in (8, 1 << 10, 64 << 10, 1 << 20, 1 << 30, 3 << 19)],
                         ["8", "1K", "64K", "1M", "1G", "1.5M"])
        self.assertEqual([dr.parse_size(s) for s in ("8", "64K", "1M", "1G")], [8, 64 << 10, 1 << 20, 1 << 30])
        self.assertEqual([dr.human_bytes(n) for n in (12, 1 << 10, 1 << 30)], ["12 B", "1 KiB", "1 GiB"])
        self.assertEqual(dr.gpu_summary("a: device 0 X (1)\na: device 0 X (1)\nb: device 0 X (1)"), "2x X")
        self.assertEqual(dr.gpu_summary("vm: no GPU"), "no GPU")


class Scripts(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True,
                              env={**os.environ, "MPLBACKEND": "Agg"}).stdout

    def test_compare_table(self):
        out = self.run_script(os.path.join(ROOT, "scripts/compare_table.py"), SWEEP, "--coll", "all_reduce",
                              "--sizes", "8,1G")
        self.assertIn("| all_reduce | 1 GiB | 2978.8 | 3285.6 | 360.5 | 326.8 | 1.10 |", out.splitlines())

    def test_in_place_rows_compare_like_with_like(self):
        """A file written before the in_place column reads as out-of-place; where a file has both measurements,
        compare_table compares out-of-place rows unless asked for the in-place ones."""
        df = dr.cases(SWEEP)
        self.assertTrue((df["in_place"] == 0).all())
        twin = df.assign(in_place=1, time_median_us=df["time_median_us"] * 2, busbw_GBs=df["busbw_GBs"] / 2)
        both = pd.concat([df, twin], ignore_index=True)
        args = (["all_reduce"], [1 << 30], ["nccl"])
        self.assertEqual(compare_table.table(both, *args), compare_table.table(df, *args))
        self.assertIn("| all_reduce | 1 GiB | 5957.6 | 6571.2 | 180.2 | 163.4 | 1.10 |",
                      compare_table.table(both, *args, in_place=True))
        self.assertEqual(len(dr.variant(both, True)), len(df))

    def test_bandwidth_figure_has_ratio_panel_size_ticks_and_footer(self):
        df = dr.cases(SWEEP)
        rows = df[(df["coll"] == "all_reduce") & (df["time_kind"] == "iteration")]
        fig = plot_harness.metric_figure(rows, "all_reduce", plot_harness.METRICS[0], "nccl")
        self.assertEqual(len(fig.axes), 2)
        ratio = fig.axes[1].lines[0].get_ydata()
        self.assertAlmostEqual(ratio[-1], 360.459 / 326.804, places=3)
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[1].get_xticklabels()]
        self.assertTrue({"1K", "1M", "1G"} <= set(ticks), ticks)
        plot_harness.footer(fig, rows)
        self.assertIn("fa9b6e9, 2 ranks on vm (2x NVIDIA H200), 2026-12-01 00:43:52 UTC", fig.texts[-1].get_text())
        one = plot_harness.metric_figure(rows[rows["backend"] == "dfccl"], "all_reduce", plot_harness.METRICS[0],
                                         "nccl")
        self.assertEqual(len(one.axes), 1)

    def test_plot_harness_writes_pngs(self):
        with tempfile.TemporaryDirectory() as out:
            made = self.run_script(os.path.join(ROOT, "scripts/plot_harness.py"), SWEEP, STRESS_NCCL, HOST_SWEEP,
                                   "--out", out).split()
            names = sorted(os.path.basename(p) for p in made)
            self.assertEqual(len(names), 16)
            self.assertIn("bandwidth_all_reduce.png", names)
            self.assertIn("deadlock_rate.png", names)
            for p in made:
                with open(p, "rb") as f:
                    self.assertEqual(f.read(8), PNG, p)
                self.assertGreater(os.path.getsize(p), 10000, p)


if __name__ == "__main__":
    unittest.main()
