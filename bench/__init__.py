"""Benchmarks. The scripts import each other as top-level modules (`harness`, `search_bench`,
`ingest_bench`), as they do when run as `python bench/x.py`; importing the package puts bench/
on the path so `python -m bench` and `bench.peers` can reuse them as they are."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)
