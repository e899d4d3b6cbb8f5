"""Runs: the reads of memory under a run id, who owns a run id, stored skill runs, reported outcomes and the runs to follow up."""
