"""The vector branch's hook: where the ``semantic`` branch enters a search.

A client runs :func:`vector_branch` after its gate, over exactly the entries the gate kept (a
revoked or expired item is never ranked, even while its vector is packed), with the query's text
and the scope's tie order; its ranks then count :func:`votes` times in the fusion beside once
for each lexical branch (:func:`fusion_columns`), and an item it scored is described by its
similarity and relevance (``Branch.described``).
"""

from __future__ import annotations

import numpy as np

from semantic.branch import NOT_INDEXED as NOT_INDEXED
from semantic.branch import OFF as OFF
from semantic.branch import Branch as Branch
from semantic.branch import vector_branch as vector_branch
from semantic.branch import votes as votes


def fusion_columns(branch: Branch, times: int) -> list[np.ndarray]:
    """The branch's ranks as columns of the fusion: counted ``times`` (its votes) when it
    ranked, none when it did not run or ranked nothing."""
    if not branch.ranked or branch.ranks is None:
        return []
    return [branch.ranks] * times


def ranks_or_none(branch: Branch) -> np.ndarray | None:
    """The branch's ranks when it ranked (what a lazy ranking fuses), else None."""
    return branch.ranks if branch.ranked else None
