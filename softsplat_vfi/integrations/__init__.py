"""Integrations with programs that users already work in (ComfyUI: integrations/comfyui)."""
