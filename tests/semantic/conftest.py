"""The knowledge tests' fixtures: the seed knowledge base and an agent that searches it."""

from tests.knowledge.conftest import fixture_documents, knowledge_base, searcher

__all__ = ["fixture_documents", "knowledge_base", "searcher"]
