"""Decode steps served from captured graphs: per batch-size bucket, static inputs, one replay a step."""
