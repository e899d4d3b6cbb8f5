"""Decisions that reach across subjects: revocation and its impact, imports of mixed files, reported outcomes."""
