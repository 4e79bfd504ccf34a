"""Tests on a real Citus cluster: a coordinator and workers built from ../shared/vendor/citus."""
