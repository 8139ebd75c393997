"""Tests of the rules that decide, written to kill mutants of them (make mutation)."""
