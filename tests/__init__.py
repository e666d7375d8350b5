"""Test suite; a package so that helpers import as ``tests.checker`` from any cwd."""
