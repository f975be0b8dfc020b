"""Tests for integration/capture."""
