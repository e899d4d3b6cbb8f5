"""Reads of intake and curation, one module per subject: threads, similarity, incidents,
re-review, proposals, and the counts of every queue (queues)."""
