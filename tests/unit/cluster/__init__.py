"""Tests for unit/cluster."""
