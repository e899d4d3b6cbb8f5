"""The pure rules of intake and curation."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest
from datasketch import MinHash, MinHashLSH
from hypothesis import given, settings
from hypothesis import strategies as st

from curation.domain import incidents as incident_rules
from curation.domain.incidents import canonical_incident, merge_plan
from curation.domain.proposals import (
    MAX_QUERY,
    PATTERN_DOCUMENT,
    PATTERN_HYPOTHESIS,
    Pattern,
    PatternCase,
    ProposalDraft,
    draft_query,
    draft_recipe,
    shared_patterns,
)
from curation.domain.similarity import (
    DEFAULT_SIMILARITY_THRESHOLD,
    LSH_WEIGHTS,
    NUM_PERM,
    band_keys,
    lsh_shape,
    shingles,
    signature,
    similarity,
    similarity_text,
)
from curation.domain.staleness import (
    DOCUMENT_NEW_VERSION,
    DOCUMENT_REVOKED,
    DocumentFinding,
    cited_documents,
    document_findings,
    unused,
)
from curation.domain.threads import (
    DIAGNOSIS,
    EXCERPT_NOT_IN_SOURCE,
    MAX_EXCERPT,
    OBSERVATION,
    OUTCOME,
    CandidateDraft,
    CounterDraft,
    Pick,
    Unit,
    candidate_case,
    excerpt_of,
    parse_thread,
    require_thread_tenant,
    thread_units,
)
from reviewconsole.errors import ValidationFailure
from tests.curation.conftest import thread_json

T0 = datetime.fromisoformat("2026-09-18T14:00:00+08:00")


def with_change(path: list[Any], value: Any) -> dict[str, Any]:
    data = thread_json()
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


# --- thread format -----------------------------------------------------------------------------


def test_the_shipped_thread_parses_with_attachments_as_text() -> None:
    thread = parse_thread(thread_json())
    assert thread.id == "T-20260918-store-002-coupon"
    assert thread.tenant == "teahouse"
    assert [m.id for m in thread.messages][:3] == ["m1", "m2", "m3"]
    m8 = next(m for m in thread.messages if m.id == "m8")
    assert m8.attachments[0].name == "活动B门店配置.png"
    assert "store-001" in m8.attachments[0].text
    assert all(m.time.tzinfo is not None for m in thread.messages)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["messages", 3, "time"], "2026-09-18T14:09:00", "messages[3].time"),
        (["messages", 0, "role"], "boss", "messages[0].role"),
        (["messages", 1, "id"], "m1", "messages[1].id"),
        (["messages", 2, "id"], "has space", "messages[2].id"),
        (["messages", 4, "author"], KeyError, "messages[4].author"),
        (["messages", 5, "text"], "", "messages[5].text"),
        (["messages", 7, "attachments", 0, "text"], "", "messages[7].attachments[0].text"),
        (["messages", 7, "attachments", 0, "size"], 12, "messages[7].attachments[0].size"),
        (["messages", 0, "mood"], "calm", "messages[0].mood"),
        (["messages"], [], "messages"),
        (["id"], "../etc", "id"),
        (["title"], KeyError, "title"),
        (["tenant"], KeyError, "tenant"),
        (["tenant"], "", "tenant"),
        (["tenant"], "*", "tenant"),
        (["tenant"], "Unknown", "tenant"),
        (["tenant"], "tea house", "tenant"),
        (["tenant"], ["teahouse"], "tenant"),
        (["extra"], 1, "extra"),
    ],
)
def test_a_bad_thread_is_refused_naming_the_json_path(
    path: list[Any], value: Any, field: str
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        parse_thread(with_change(path, value))
    assert refused.value.field == field


def test_a_naive_message_time_is_refused_never_read_in_a_local_zone() -> None:
    with pytest.raises(ValidationFailure, match="timezone offset"):
        parse_thread(with_change(["messages", 0, "time"], "2026-09-18T14:02:00"))


def test_a_message_with_only_an_attachment_is_accepted() -> None:
    data = with_change(["messages", 7, "text"], "")
    assert parse_thread(data).messages[7].text == ""


def test_the_content_hash_ignores_how_the_offset_was_written() -> None:
    utc = copy.deepcopy(thread_json())
    utc["messages"][0]["time"] = "2026-09-18T06:02:00Z"
    assert parse_thread(utc).content_hash == parse_thread(thread_json()).content_hash


def test_the_tenant_is_part_of_the_content() -> None:
    other = with_change(["tenant"], "other-co")
    assert parse_thread(other).tenant == "other-co"
    assert parse_thread(other).content_hash != parse_thread(thread_json()).content_hash
    padded = with_change(["tenant"], " teahouse ")
    assert parse_thread(padded).content_hash == parse_thread(thread_json()).content_hash


def test_a_candidate_from_a_thread_keeps_the_threads_tenant() -> None:
    require_thread_tenant("teahouse", {"tenant": "teahouse", "brand": "b"})
    require_thread_tenant("teahouse", {"tenant": " teahouse "})
    for scope in ({"tenant": "other-co"}, {"tenant": ""}, {}):
        with pytest.raises(ValidationFailure) as refused:
            require_thread_tenant("teahouse", scope)
        assert refused.value.field == "scope.tenant"
        assert "'teahouse'" in refused.value.message


# --- picking -----------------------------------------------------------------------------------


def units() -> list[Unit]:
    thread = parse_thread(thread_json())
    return thread_units(thread.id, thread.messages)


def draft(**changes: Any) -> CandidateDraft:
    values: dict[str, Any] = {
        "scope": {
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "store": "store-002",
            "campaign": "campaign-b",
            "deployment": "release-1",
        },
        "incident": "INC-0918",
        "title": "二号店优惠券无法使用：活动 B 门店范围漏配",
        "summary": "",
        "valid_from": "2026-09-18T00:00:00+08:00",
        "valid_to": "2027-09-18T00:00:00+08:00",
        "diagnosis": "活动 B 的适用门店不含二号店。",
        "counterevidence": (
            CounterDraft(
                "客户端缓存未刷新", "刷新和重新登录后仍失败。", "仅客户端缓存；服务端缓存未排除"
            ),
        ),
        "outcome": "补充门店后顾客可以下单。",
    }
    values.update(changes)
    return CandidateDraft(**values)


def test_units_cite_message_ids_and_attachments() -> None:
    keys = {u.key: u.source_id for u in units()}
    thread = "thread:T-20260918-store-002-coupon"
    assert keys["m1"] == f"{thread}#m1"
    assert keys["m8/attachment-1"] == f"{thread}#m8/attachment-1"


def test_the_case_holds_only_what_was_picked_in_thread_order() -> None:
    picks = [
        Pick("m8/attachment-1", DIAGNOSIS),
        Pick("m8", DIAGNOSIS, "适用门店列表只有一号店和三号店，二号店漏配了"),
        Pick("m4", "counter-1"),
        Pick("m1", OBSERVATION),
        Pick("m10", OUTCOME, "好了，谢谢"),
    ]
    case = candidate_case(units(), picks, draft())
    assert [e["source_id"].rsplit("#", 1)[1] for e in case["diagnosis"]["evidence"]] == [
        "m8",
        "m8/attachment-1",
    ]
    assert (
        case["diagnosis"]["evidence"][0]["excerpt"]
        == "适用门店列表只有一号店和三号店，二号店漏配了"
    )
    assert case["observations"][0]["excerpt"].startswith("二号店有位顾客反馈")
    assert case["counterevidence"][0]["evidence"][0]["source_id"].endswith("#m4")
    assert case["outcome"]["evidence"] == [
        {"source_id": "thread:T-20260918-store-002-coupon#m10", "excerpt": "好了，谢谢"}
    ]
    # Nothing that was not picked, and no statement that was not typed.
    cited = {e["source_id"] for e in case["observations"]}
    assert cited == {"thread:T-20260918-store-002-coupon#m1"}


def test_without_picks_and_statements_the_sections_stay_empty() -> None:
    empty = draft(diagnosis="", counterevidence=(), outcome="")
    case = candidate_case(units(), [], empty)
    assert case["observations"] == []
    assert case["diagnosis"] == {"statement": "", "evidence": []}
    assert case["counterevidence"] == []
    assert case["outcome"] == {"statement": "", "evidence": []}


def test_an_excerpt_must_be_part_of_the_picked_message() -> None:
    with pytest.raises(ValidationFailure) as refused:
        candidate_case(units(), [Pick("m10", OUTCOME, "原因是门店范围")], draft())
    assert refused.value.field == "excerpt[m10]"
    assert refused.value.message == EXCERPT_NOT_IN_SOURCE


def test_an_excerpt_may_span_a_line_break_written_as_a_space() -> None:
    unit = Unit("x", "thread:t#x", "第一行\n第二行")
    assert excerpt_of(unit, "第一行 第二行", field="f") == "第一行 第二行"


def test_a_long_message_must_be_cut_to_the_part_that_matters() -> None:
    unit = Unit("x", "thread:t#x", "长" * (MAX_EXCERPT + 1))
    with pytest.raises(ValidationFailure, match="select the part"):
        excerpt_of(unit, "", field="excerpt[x]")
    assert excerpt_of(unit, "长长", field="excerpt[x]") == "长长"


@pytest.mark.parametrize(
    ("picks", "counter", "field"),
    [
        ([Pick("m4", "counter-2")], (CounterDraft(),), "counter-2-hypothesis"),
        (
            [Pick("m4", "counter-1")],
            (CounterDraft("", "x", "y"),),
            "counter-1-hypothesis",
        ),
        ([], (CounterDraft("缓存", "", "客户端"),), "counter-1-statement"),
        ([], (CounterDraft("缓存", "刷新仍失败", ""),), "counter-1-refutes"),
        ([Pick("m99", OBSERVATION)], (), "use[m99]"),
        ([Pick("m1", "conclusion")], (), "use[m1]"),
    ],
)
def test_incomplete_picks_are_refused_naming_the_form_field(
    picks: list[Pick], counter: tuple[CounterDraft, ...], field: str
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        candidate_case(units(), picks, draft(counterevidence=counter))
    assert refused.value.field == field


# --- similarity ----------------------------------------------------------------------------------

SUMMARY_A = similarity_text(
    "二号店优惠券无法使用：门店范围漏配",
    "顾客在二号店小程序使用优惠券失败。",
    ["顾客：优惠券用不了。"],
    "活动适用门店不含二号店。",
)
SUMMARY_B = similarity_text(
    "二号店小程序优惠券用不了，活动门店未包含二号店",
    "客户在二号店用小程序下单，优惠券无法使用。",
    ["客户说优惠券用不了"],
    "活动门店范围没有二号店。",
)
UNRELATED = similarity_text("二号店小票打印机断电", "收银台无法打印小票。", [], "插线板松动")


def test_two_wordings_of_one_incident_reach_the_default_threshold() -> None:
    a, b, c = (shingles(t) for t in (SUMMARY_A, SUMMARY_B, UNRELATED))
    assert similarity(a, b) >= DEFAULT_SIMILARITY_THRESHOLD
    assert similarity(a, c) < DEFAULT_SIMILARITY_THRESHOLD


def test_signatures_are_deterministic_and_order_free() -> None:
    shingle_set = shingles(SUMMARY_A)
    assert signature(shingle_set) == signature(sorted(shingle_set, reverse=True))
    assert len(signature(shingle_set)) == NUM_PERM


def test_the_lsh_shape_favours_recall_at_the_threshold() -> None:
    bands, rows = lsh_shape(DEFAULT_SIMILARITY_THRESHOLD)
    assert bands * rows <= NUM_PERM
    chance = 1 - (1 - DEFAULT_SIMILARITY_THRESHOLD**rows) ** bands
    assert chance > 0.9


words = st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(words, words)
def test_stored_band_keys_find_exactly_the_pairs_datasketch_lsh_finds(
    left: list[str], right: list[str]
) -> None:
    threshold = DEFAULT_SIMILARITY_THRESHOLD
    bands, rows = lsh_shape(threshold)
    a, b = signature(set(left)), signature(set(right))
    ours = bool(
        set(band_keys(a, bands=bands, rows=rows)) & set(band_keys(b, bands=bands, rows=rows))
    )
    index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM, weights=LSH_WEIGHTS)
    index.insert("a", MinHash(num_perm=NUM_PERM, hashvalues=a, scheme="affine32"))
    theirs = index.query(MinHash(num_perm=NUM_PERM, hashvalues=b, scheme="affine32")) == ["a"]
    assert ours == theirs


# --- incidents -----------------------------------------------------------------------------------


def test_a_merge_makes_two_incidents_one_and_chains_resolve() -> None:
    merges = {"INC-2": "INC-1", "INC-3": "INC-2"}
    assert canonical_incident("INC-3", merges) == "INC-1"
    roots = {canonical_incident(i, merges) for i in ["INC-1", "INC-2", "INC-3", "INC-4"]}
    assert roots == {"INC-1", "INC-4"}
    # Counting lives in experience.core.domain.
    assert not hasattr(incident_rules, "distinct_incidents")


def test_a_merge_plan_records_roots_and_refuses_what_is_already_one() -> None:
    merges = {"INC-2": "INC-1"}
    assert merge_plan("INC-3", "INC-2", merges) == ("INC-3", "INC-1")
    assert merge_plan("INC-2", "INC-4", merges) == ("INC-1", "INC-4")
    with pytest.raises(ValidationFailure, match="already"):
        merge_plan("INC-2", "INC-1", merges)


def test_a_cycle_in_stored_merges_cannot_loop_forever() -> None:
    assert canonical_incident("a", {"a": "b", "b": "a"}) in {"a", "b"}


# --- staleness -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("approved_days_ago", "read_days_ago", "confirmed_days_ago", "stale"),
    [
        (100, None, None, True),
        (100, 89, None, False),
        (100, 91, None, True),
        (30, None, None, False),
        (100, None, 10, False),
        (90, None, None, True),
    ],
)
def test_unused_means_no_approval_read_or_confirmation_within_the_window(
    approved_days_ago: int, read_days_ago: int | None, confirmed_days_ago: int | None, stale: bool
) -> None:
    def ago(days: int | None) -> datetime | None:
        return None if days is None else T0 - timedelta(days=days)

    assert (
        unused(
            approved_at=T0 - timedelta(days=approved_days_ago),
            last_read_at=ago(read_days_ago),
            last_confirmed_at=ago(confirmed_days_ago),
            now=T0,
            days=90,
        )
        is stale
    )


def test_documents_are_cited_by_exact_doc_source_ids() -> None:
    assert cited_documents(
        [
            "doc:rule-b@2",
            "doc:rule-b@2#requirements",
            "doc:case-1@1/text",
            "thread:x#m1",
            "doc:x",
            "doc:y@0",
        ]
    ) == {("rule-b", 2), ("case-1", 1)}


def test_document_findings_name_the_newer_version_and_revocations() -> None:
    findings = document_findings(
        {("rule-b", 1), ("rule-c", 3), ("rule-d", 2)},
        revoked={("rule-c", 3)},
        newest_approved={"rule-b": 2, "rule-c": 3, "rule-d": 2},
    )
    assert findings == [
        DocumentFinding(DOCUMENT_NEW_VERSION, "doc:rule-b@1", "doc:rule-b@2"),
        DocumentFinding(DOCUMENT_REVOKED, "doc:rule-c@3"),
    ]


# --- check patterns ------------------------------------------------------------------------------

SCOPE = (("brand", "b"), ("campaign", "c"), ("deployment", "d"), ("store", "s"), ("tenant", "t"))


def pattern_case(case_id: str, incident: str, **changes: Any) -> PatternCase:
    values: dict[str, Any] = {
        "case_id": case_id,
        "scope": SCOPE,
        "incident": incident,
        "title": case_id,
        "documents": frozenset(),
        "hypotheses": ("缓存未刷新",),
    }
    values.update(changes)
    return PatternCase(**values)


def test_a_pattern_shared_by_two_distinct_incidents_is_proposed() -> None:
    drafts = shared_patterns(
        [
            pattern_case("case:1", "INC-1"),
            pattern_case("case:2", "INC-2", hypotheses=("缓存 未刷新。",)),
        ]
    )
    assert drafts == [
        ProposalDraft(
            scope=SCOPE,
            pattern=Pattern(PATTERN_HYPOTHESIS, "缓存未刷新"),
            case_ids=("case:1", "case:2"),
            incidents=("INC-1", "INC-2"),
        )
    ]


def test_two_summaries_of_one_incident_propose_nothing() -> None:
    assert shared_patterns([pattern_case("case:1", "INC-1"), pattern_case("case:2", "INC-1")]) == []


def test_other_scopes_do_not_share_a_pattern() -> None:
    elsewhere = (*SCOPE[:3], ("store", "other"), SCOPE[4])
    assert (
        shared_patterns(
            [pattern_case("case:1", "INC-1"), pattern_case("case:2", "INC-2", scope=elsewhere)]
        )
        == []
    )


def test_documents_are_a_pattern_whatever_their_version() -> None:
    drafts = shared_patterns(
        [
            pattern_case("case:1", "INC-1", hypotheses=(), documents=frozenset({"rule-b"})),
            pattern_case("case:2", "INC-2", hypotheses=("别的",), documents=frozenset({"rule-b"})),
        ]
    )
    assert [d.pattern for d in drafts] == [Pattern(PATTERN_DOCUMENT, "rule-b")]


def test_a_drafted_recipe_is_one_bounded_search_step() -> None:
    query = draft_query(Pattern(PATTERN_DOCUMENT, "rule-b"), document_title="券" * 300)
    assert len(query) == MAX_QUERY
    assert draft_recipe(query) == [{"tool": "search_knowledge", "arguments": {"query": query}}]
