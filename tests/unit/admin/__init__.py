"""Tests for unit/admin."""
