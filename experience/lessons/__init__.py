"""Lessons: typed rules citing cases, their confidence (evidence and run outcomes), conflicts and merges."""
