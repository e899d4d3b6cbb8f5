"""Lessons: typed rules citing cases, their confidence (evidence and run outcomes), the outdated
rule's inputs, submission and merge proposals (their review is in ``experience.review``)."""
