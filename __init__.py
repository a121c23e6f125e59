"""ComfyUI's entry point when this repository is cloned into ComfyUI/custom_nodes/ (ComfyUI imports
``custom_nodes/<folder>/__init__.py`` as a package): the node pack lives in integrations/comfyui/.

Nothing else imports this file: the command line, the tests and the library use the packages beside it directly.
"""

from .integrations.comfyui import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
