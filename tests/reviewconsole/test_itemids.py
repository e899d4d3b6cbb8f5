"""Item ids: one parser and one formatter, and the console URL an id resolves to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import CASE, DOCUMENT, KINDS, SKILL, ItemId, parse, parse_reference

HEX = "0123456789abcdef"
digests = st.text(HEX, min_size=64, max_size=64)
doc_keys = st.from_regex(itemids.DOCUMENT_KEY, fullmatch=True)
versions = st.integers(min_value=1, max_value=999_999_999)
item_ids = st.one_of(
    st.builds(ItemId.case, digests),
    st.builds(ItemId.skill, digests),
    st.builds(ItemId.document, doc_keys, versions),
)


@given(item_ids)
def test_parse_reads_back_what_format_wrote(item: ItemId) -> None:
    assert parse(str(item)) == item
    assert parse(itemids.format_id(item)) == item


@given(item_ids)
def test_an_id_matches_the_pattern_of_its_kind_only(item: ItemId) -> None:
    import re

    matching = [kind for kind in KINDS if re.fullmatch(kind.pattern, str(item))]
    assert matching == [item.kind]


@given(item_ids, st.sampled_from(["#", "/"]), st.text(max_size=20))
def test_a_reference_is_the_id_and_the_part_it_names(item: ItemId, sep: str, rest: str) -> None:
    assert parse_reference(f"{item}{sep}{rest}") == (item, f"{sep}{rest}")


@given(st.text(max_size=80))
def test_text_without_a_known_prefix_is_refused_naming_the_field(text: str) -> None:
    if any(text.startswith(kind.prefix) for kind in KINDS):
        return
    with pytest.raises(ValidationFailure) as refused:
        parse(text, field="target")
    assert refused.value.field == "target"
    assert refused.value.message == itemids.UNKNOWN_KIND


@given(st.sampled_from([CASE, SKILL]), st.text(max_size=70))
def test_a_digest_id_needs_64_lower_case_hex_digits(kind: itemids.Kind, body: str) -> None:
    if len(body) == 64 and set(body) <= set(HEX):
        return
    with pytest.raises(ValidationFailure) as refused:
        parse(kind.prefix + body, field="cases[0]")
    assert (refused.value.field, refused.value.message) == ("cases[0]", itemids.malformed(kind))


@pytest.mark.parametrize(
    "text",
    [
        "doc:",
        "doc:key",
        "doc:key@",
        "doc:@1",
        "doc:key@0",
        "doc:key@01",
        "doc:key@1.0",
        "doc:key@-1",
        "doc:key@1234567890",
        "doc:k y@1",
        "doc:key@1#part",  # a part is a reference, not an id
        "doc:" + "k" * 101 + "@1",
        "case:" + "A" * 64,
        "case:" + "a" * 63,
        "skill:" + "a" * 65,
        "CASE:" + "a" * 64,
        "",
    ],
)
def test_malformed_ids_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(ValidationFailure) as refused:
        parse(text, field="id")
    assert refused.value.field == "id"
    assert str(refused.value).startswith("id: must ")


def test_a_value_that_is_not_text_is_refused() -> None:
    with pytest.raises(ValidationFailure) as refused:
        parse(42, field="supersedes")
    assert (refused.value.field, refused.value.message) == ("supersedes", itemids.NOT_TEXT)


def test_parse_can_ask_for_some_kinds_only() -> None:
    document = "doc:refunds@3"
    assert parse(document, kinds=(DOCUMENT,)) == ItemId.document("refunds", 3)
    with pytest.raises(ValidationFailure) as refused:
        parse("case:" + "a" * 64, field="ID", kinds=(DOCUMENT,))
    assert refused.value.message == itemids.wrong_kind((DOCUMENT,))
    with pytest.raises(ValidationFailure):
        parse("lesson:1", kinds=(CASE,))


def test_only_content_named_ids_have_a_digest() -> None:
    assert ItemId.case("a" * 64).digest == "a" * 64
    assert itemids.digest_of("skill:" + "b" * 64) == "b" * 64
    with pytest.raises(ValueError):
        ItemId.document("refunds", 1).digest  # noqa: B018
    with pytest.raises(ValidationFailure):
        itemids.digest_of("doc:refunds@1")


def test_the_module_imports_no_django() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(itemids))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not any(str(name).startswith("django") for name in imported)


def test_only_versioned_ids_have_a_key_and_version() -> None:
    assert parse("doc:refunds@3").key_version == ("refunds", 3)
    with pytest.raises(ValueError):
        ItemId.case("a" * 64).key_version  # noqa: B018


def test_no_other_module_spells_an_id_prefix() -> None:
    """Ids are formatted and parsed only here: a literal ``doc:``/``case:``/``skill:`` (an
    f-string's included) anywhere else is a second copy of the format."""
    import ast
    from pathlib import Path

    from django.apps import apps
    from django.conf import settings

    base = Path(settings.BASE_DIR)
    ours = [Path(config.path) for config in apps.get_app_configs()]
    ours = [path for path in ours if path.is_relative_to(base) and ".venv" not in path.parts]
    assert {path.name for path in ours} >= {"reviewconsole", "knowledge", "experience"}
    prefixes = tuple(kind.prefix for kind in KINDS)
    found = []
    for path in sorted(p for app in ours for p in app.rglob("*.py")):
        if "migrations" in path.parts or path == base / "reviewconsole" / "itemids.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # Messages and help texts name the format in prose (with spaces); ids have none.
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith(prefixes)
                and not any(char.isspace() for char in node.value)
            ):
                found.append(f"{path.relative_to(base)}:{node.lineno}")
    assert found == []
