"""The retrieval index of reviewed memory: entries and posting lists per exact scope, kept in step with every item."""
