"""Find the line and column of a field path inside a document, by composing the file again with marks.

Only documents that failed validation need this, so the happy path never pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from reconciler.manifests.parse import MemoLoader

PathElem = str | int


class FileNodes:
    """The composed node trees of one file's documents, indexed like ``Document.index``."""

    def __init__(self, text: str) -> None:
        self.roots: list[yaml.Node] = []
        loader = MemoLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    break
                self.roots.append(node)
        except yaml.YAMLError:
            pass  # positions of documents after a syntax error are not needed: they were never loaded
        finally:
            loader.dispose()

    def locate(self, index: int, path: Sequence[PathElem], at_key: bool = False) -> tuple[int, int] | None:
        """Position of the node at ``path`` (of its key when ``at_key``), else of its deepest ancestor.

        When the path stops early (a missing field), the deepest key found is the best place to point at.
        """
        if index >= len(self.roots):
            return None
        node: yaml.Node = self.roots[index]
        best: yaml.Node = node
        best_key: yaml.Node | None = None
        for i, elem in enumerate(path):
            last = i == len(path) - 1
            child: yaml.Node | None = None
            key_node: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == str(elem):
                        key_node, child = k, v
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(elem, int):
                child = node.value[elem] if 0 <= elem < len(node.value) else None
            if child is None:
                if best_key is not None:
                    best = best_key
                break
            if last and at_key and key_node is not None:
                best = key_node
                break
            best = child if key_node is None or not _empty(child) else key_node
            best_key = key_node
            node = child
        return best.start_mark.line + 1, best.start_mark.column + 1


def _empty(node: yaml.Node) -> bool:
    """A null value has no text of its own: point at its key instead."""
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null" and node.value == ""
