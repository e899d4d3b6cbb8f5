"""Every review decision, with its effects named (``decisions``, ``revocation``, ``outdating``,
``lesson_conflicts``, ``conflicts``, ``documents``), one lifecycle described per kind
(``lifecycle``), revocation impact, imports of mixed files, reported outcomes."""
