"""Tests for integration/cluster."""
