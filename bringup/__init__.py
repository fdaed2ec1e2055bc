"""bringup: bring LLM inference up on new or unfamiliar accelerators."""

__version__ = "0.1.0"
