#!/usr/bin/env python3
"""Regenerates docs/environment.md from the table in lib/src/env.cpp (tests/unit/env_doc_test.cpp checks it)."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
rows = re.findall(r'\{"(DFCCL_\w+)",\s*"([^"]*)",\s*"([^"]*)"\}', (root / "lib/src/env.cpp").read_text())
out = [
    "# Environment variables", "",
    "Every `DFCCL_*` variable, its default and its effect. The table is `lib/src/env.cpp` (the only place they are",
    "defined; `scripts/env_doc.py` writes this page from it); `build/bin/dfccl-info` prints it with the values set in",
    "the current environment. Values are read when an engine or communicator is created. All ranks of a communicator",
    "must agree on the transport settings (blocks, slot bytes, slots, lanes, channel size): init checks it and names",
    "the mismatch.", "",
    "| variable | default | effect |", "|---|---|---|",
]
out += [f"| `{n}` | `{d}` | {e} |" for n, d, e in rows]
out += ["", "The harness reads its own settings from workload files and the command line (`docs/harness.md`); it sets",
        "`NCCL_NVLS_ENABLE=0` when unset (required on our GPU machines).", "",
        "Build options for measurements (pass them in both CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS):",
        "`-DDFCCL_PROFILE=1` (time per daemon phase in `dfcclStats_t.profileNs`), `-DDFCCL_COPY_UNROLL=N` (16-byte",
        "loads in flight per thread, default 4), `-DDFCCL_MAX_THREADS=1024` (allows DFCCL_THREADS up to 1024);",
        "docs/lab/performance-log.md, sections 4 and 5."]
(root / "docs/environment.md").write_text("\n".join(out) + "\n")
