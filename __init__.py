"""ComfyUI's entry point when this repository is cloned into ComfyUI/custom_nodes/ (ComfyUI imports
``custom_nodes/<folder>/__init__.py`` as a package): the node pack is softsplat_vfi/integrations/comfyui/.

Every import inside ``softsplat_vfi`` is relative, so there it loads as ``<folder>.softsplat_vfi`` and takes no
top-level name beside other node packs. Nothing else imports this file.
"""

from .softsplat_vfi.integrations.comfyui import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
