"""Tests for integration/admin."""
