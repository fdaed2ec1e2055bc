"""`bringup export`: launch configurations for other engines (vLLM, llama.cpp's llama-server) derived from a profile's
evidence — each flag with the profile entries it comes from, each flag left out with why and what to run to get it.

Torch-free, as the report is: it reads a profile (and a model directory's config.json), never a device's name.
`export_config` builds an EngineConfig; render.py turns one into text lines or the `bringup.export/v1` document.
"""

from bringup.export.config import EngineConfig, ModelChoice, Note, Omitted, Setting
from bringup.export.engines import ENGINE_NAMES, export_config

__all__ = ["ENGINE_NAMES", "EngineConfig", "ModelChoice", "Note", "Omitted", "Setting", "export_config"]
