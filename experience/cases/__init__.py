"""Reviewed items: investigation cases and their evidence, skills, their review rules, and the executor that runs a skill."""
