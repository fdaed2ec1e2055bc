"""Reading a model directory: its config.json, its safetensors checked before use, all inside the directory."""
