"""Reviewed items: investigation cases and their evidence, skills, their submission and review
rules (their review decisions are in ``experience.review``), and the executor that runs a
skill."""
