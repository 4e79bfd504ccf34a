"""Where the benchmarks read data and write results."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "bench" / "results"

DATA = ROOT.parent / "shared" / "data"  # BEIR folders (nfcorpus, medline)
NFCORPUS = DATA / "nfcorpus"
