"""This service beside its alternatives, in one run: `python -m bench` (see bench/__main__.py)."""
