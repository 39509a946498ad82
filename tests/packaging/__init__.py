"""Tests of the packaging support: the self-test, the spec's helpers, the packaging files (no bundle build)."""
