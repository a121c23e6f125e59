"""softsplat-vfi's ComfyUI node pack: a loader node and an interpolate node (nodes.py; docs/integrations.md).

ComfyUI loads ``custom_nodes/<folder>/__init__.py``; cloning this repository there makes <folder> the repository,
whose root ``__init__.py`` re-exports these mappings. Importing this package reads engine/about.py for the nodes'
descriptions and nothing else: torch and the network load when a node first runs.
"""

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
