"""Reading memory for an agent: ``retrieve_experience`` and the context block, one pipeline over the index."""
