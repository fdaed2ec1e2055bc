"""OpenAI-compatible HTTP server over the runner engine."""
