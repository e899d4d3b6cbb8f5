"""Intake and curation rules over plain values, one module per subject: threads (the thread
format, picking messages into a candidate), similarity (shingles, MinHash, LSH, two cases side by
side), incidents (incident identity), staleness (cited documents, unused items) and proposals
(check patterns, proven success patterns).

No Django imports: the clock, the merges and the stored facts are passed in, so every rule can be
tested without a database. Each module's docstring defines its subject's terms.
"""
