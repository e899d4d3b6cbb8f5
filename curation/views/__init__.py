"""Intake and curation pages, one module per subject: threads into candidates (threads),
near-duplicates (similarity), incident merges (incidents), the re-review queue (rereview), skill
proposals and support counted in incidents (proposals), and the curation home (home).

Views parse input, call one service or selector, and render; rules live in ``curation.domain``.
"""

PER_PAGE = 25
