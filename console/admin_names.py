"""The Django admin in the reader's language: app, model and column names.

The names Django derives from class and field names (``skillcase``, ``valid_to``) are English and
untranslatable. Setting ``verbose_name`` in each model's ``Meta`` or field would write a migration
per app for words alone; instead the shell, which sees every app, gives each app, model and field
its translatable name when the apps are ready. Only the displayed names change (``_meta``'s
``verbose_name`` and a field's ``verbose_name``, not what a field was declared with), so the
migrations' state is untouched. The English stays what Django showed before.
"""

from __future__ import annotations

from django.apps import apps
from django.db.models import Field
from django.utils.translation import pgettext_lazy
from django_stubs_ext import StrPromise

# The apps whose admin pages this names (Django's own apps translate themselves).
PRODUCT_APPS = (
    "reviewconsole",
    "knowledge",
    "experience",
    "curation",
    "evaluation",
    "agentapi",
    "investigations",
    "semantic",
    "console",
)


def _admin(text: str) -> StrPromise:
    return pgettext_lazy("admin", text)


APP_NAMES: dict[str, StrPromise] = {
    "reviewconsole": pgettext_lazy("admin", "review console core"),
    "knowledge": pgettext_lazy("admin", "knowledge base"),
    "experience": pgettext_lazy("admin", "experience memory"),
    "curation": pgettext_lazy("admin", "intake and curation"),
    "evaluation": pgettext_lazy("admin", "replay evaluation"),
    "agentapi": pgettext_lazy("admin", "agent API"),
    "investigations": pgettext_lazy("admin", "investigations"),
    "semantic": pgettext_lazy("admin", "semantic index"),
    "console": pgettext_lazy("admin", "console shell"),
}
# Each model's name, singular and plural.
MODEL_NAMES: dict[str, tuple[StrPromise, StrPromise]] = {
    "reviewconsole.event": (pgettext_lazy("admin", "event"), pgettext_lazy("admin", "events")),
    "reviewconsole.chainhead": (
        pgettext_lazy("admin", "chain head"),
        pgettext_lazy("admin", "chain heads"),
    ),
    "reviewconsole.workerheartbeat": (
        pgettext_lazy("admin", "worker heartbeat"),
        pgettext_lazy("admin", "worker heartbeats"),
    ),
    "reviewconsole.accountorigin": (
        pgettext_lazy("admin", "account origin"),
        pgettext_lazy("admin", "account origins"),
    ),
    "reviewconsole.tenant": (pgettext_lazy("admin", "tenant"), pgettext_lazy("admin", "tenants")),
    "reviewconsole.tenantmembership": (
        pgettext_lazy("admin", "tenant membership"),
        pgettext_lazy("admin", "tenant memberships"),
    ),
    "knowledge.document": (pgettext_lazy("admin", "document"), pgettext_lazy("admin", "documents")),
    "knowledge.synonym": (pgettext_lazy("admin", "synonym"), pgettext_lazy("admin", "synonyms")),
    "knowledge.searchscope": (
        pgettext_lazy("admin", "search scope"),
        pgettext_lazy("admin", "search scopes"),
    ),
    "knowledge.searchentry": (
        pgettext_lazy("admin", "search entry"),
        pgettext_lazy("admin", "search entries"),
    ),
    "knowledge.postinglist": (
        pgettext_lazy("admin", "posting list"),
        pgettext_lazy("admin", "posting lists"),
    ),
    "knowledge.lexiconstate": (
        pgettext_lazy("admin", "lexicon state"),
        pgettext_lazy("admin", "lexicon states"),
    ),
    "experience.case": (pgettext_lazy("admin", "case"), pgettext_lazy("admin", "cases")),
    "experience.skill": (pgettext_lazy("admin", "skill"), pgettext_lazy("admin", "skills")),
    "experience.skillcase": (
        pgettext_lazy("admin", "skill case"),
        pgettext_lazy("admin", "skill cases"),
    ),
    "experience.evidence": (
        pgettext_lazy("admin", "evidence"),
        pgettext_lazy("admin", "evidence items"),
    ),
    "experience.evidencecheck": (
        pgettext_lazy("admin", "evidence check"),
        pgettext_lazy("admin", "evidence checks"),
    ),
    "experience.reference": (
        pgettext_lazy("admin", "reference"),
        pgettext_lazy("admin", "references"),
    ),
    "experience.run": (pgettext_lazy("admin", "run"), pgettext_lazy("admin", "runs")),
    "experience.runcitation": (
        pgettext_lazy("admin", "run citation"),
        pgettext_lazy("admin", "run citations"),
    ),
    "experience.revocationimpact": (
        pgettext_lazy("admin", "revocation impact"),
        pgettext_lazy("admin", "revocation impacts"),
    ),
    "experience.lesson": (pgettext_lazy("admin", "lesson"), pgettext_lazy("admin", "lessons")),
    "experience.lessoncase": (
        pgettext_lazy("admin", "lesson case"),
        pgettext_lazy("admin", "lesson cases"),
    ),
    "experience.lessonconflict": (
        pgettext_lazy("admin", "lesson conflict"),
        pgettext_lazy("admin", "lesson conflicts"),
    ),
    "experience.lessonmergeproposal": (
        pgettext_lazy("admin", "lesson merge proposal"),
        pgettext_lazy("admin", "lesson merge proposals"),
    ),
    "experience.runoutcome": (
        pgettext_lazy("admin", "run outcome"),
        pgettext_lazy("admin", "run outcomes"),
    ),
    "experience.runowner": (
        pgettext_lazy("admin", "run owner"),
        pgettext_lazy("admin", "run owners"),
    ),
    "experience.runfollowup": (
        pgettext_lazy("admin", "run follow-up"),
        pgettext_lazy("admin", "run follow-ups"),
    ),
    "experience.indexscope": (
        pgettext_lazy("admin", "index scope"),
        pgettext_lazy("admin", "index scopes"),
    ),
    "experience.indexentry": (
        pgettext_lazy("admin", "index entry"),
        pgettext_lazy("admin", "index entries"),
    ),
    "experience.indexposting": (
        pgettext_lazy("admin", "index posting"),
        pgettext_lazy("admin", "index postings"),
    ),
    "experience.indexdelta": (
        pgettext_lazy("admin", "index change awaiting merge"),
        pgettext_lazy("admin", "index changes awaiting merge"),
    ),
    "agentapi.apitoken": (
        pgettext_lazy("admin", "API token"),
        pgettext_lazy("admin", "API tokens"),
    ),
    "agentapi.ratecount": (
        pgettext_lazy("admin", "rate count"),
        pgettext_lazy("admin", "rate counts"),
    ),
    "agentapi.liverun": (pgettext_lazy("admin", "live run"), pgettext_lazy("admin", "live runs")),
    "evaluation.heldoutticket": (
        pgettext_lazy("admin", "held-out ticket"),
        pgettext_lazy("admin", "held-out tickets"),
    ),
    "evaluation.heldoutrun": (
        pgettext_lazy("admin", "held-out run"),
        pgettext_lazy("admin", "held-out runs"),
    ),
    "evaluation.replayreport": (
        pgettext_lazy("admin", "replay report"),
        pgettext_lazy("admin", "replay reports"),
    ),
    "curation.thread": (pgettext_lazy("admin", "thread"), pgettext_lazy("admin", "threads")),
    "curation.nearduplicate": (
        pgettext_lazy("admin", "near-duplicate"),
        pgettext_lazy("admin", "near-duplicates"),
    ),
    "curation.incidentmerge": (
        pgettext_lazy("admin", "incident merge"),
        pgettext_lazy("admin", "incident merges"),
    ),
    "curation.rereview": (
        pgettext_lazy("admin", "re-review"),
        pgettext_lazy("admin", "re-reviews"),
    ),
    "curation.skillproposal": (
        pgettext_lazy("admin", "skill proposal"),
        pgettext_lazy("admin", "skill proposals"),
    ),
    "curation.casesignature": (
        pgettext_lazy("admin", "case signature"),
        pgettext_lazy("admin", "case signatures"),
    ),
    "curation.caseband": (
        pgettext_lazy("admin", "case band"),
        pgettext_lazy("admin", "case bands"),
    ),
    "curation.rundraft": (
        pgettext_lazy("admin", "run draft"),
        pgettext_lazy("admin", "run drafts"),
    ),
    "curation.notificationoptout": (
        pgettext_lazy("admin", "notification opt-out"),
        pgettext_lazy("admin", "notification opt-outs"),
    ),
    "curation.notificationsent": (
        pgettext_lazy("admin", "notification sent"),
        pgettext_lazy("admin", "notifications sent"),
    ),
    "curation.outboxmail": (
        pgettext_lazy("admin", "outbox mail"),
        pgettext_lazy("admin", "outbox mails"),
    ),
    "investigations.investigation": (
        pgettext_lazy("admin", "investigation"),
        pgettext_lazy("admin", "investigations"),
    ),
    "investigations.investigationrequest": (
        pgettext_lazy("admin", "investigation request"),
        pgettext_lazy("admin", "investigation requests"),
    ),
    "semantic.itemvector": (
        pgettext_lazy("admin", "item vector"),
        pgettext_lazy("admin", "item vectors"),
    ),
    "semantic.scopevectors": (
        pgettext_lazy("admin", "scope vectors"),
        pgettext_lazy("admin", "scope vectors"),
    ),
    "semantic.packedmatrix": (
        pgettext_lazy("admin", "packed matrix"),
        pgettext_lazy("admin", "packed matrices"),
    ),
    "semantic.vectordelta": (
        pgettext_lazy("admin", "vector awaiting merge"),
        pgettext_lazy("admin", "vectors awaiting merge"),
    ),
    "knowledge.documentstore": (
        pgettext_lazy("admin", "document store"),
        pgettext_lazy("admin", "document stores"),
    ),
    "curation.threadmessage": (
        pgettext_lazy("admin", "thread message"),
        pgettext_lazy("admin", "thread messages"),
    ),
}
# A field's name as Django derives it from the field, in the reader's language.
COLUMN_NAMES: dict[str, StrPromise] = {
    "action": pgettext_lazy("admin", "action"),
    "actor": pgettext_lazy("admin", "actor"),
    "actor name": pgettext_lazy("admin", "actor name"),
    "alias": pgettext_lazy("admin", "alias"),
    "attached": pgettext_lazy("admin", "attached"),
    "attempts": pgettext_lazy("admin", "attempts"),
    "brand": pgettext_lazy("admin", "brand"),
    "campaign": pgettext_lazy("admin", "campaign"),
    "candidate": pgettext_lazy("admin", "candidate"),
    "canonical": pgettext_lazy("admin", "canonical"),
    "case": pgettext_lazy("admin", "case"),
    "case a": pgettext_lazy("admin", "case a"),
    "case b": pgettext_lazy("admin", "case b"),
    "case id": pgettext_lazy("admin", "case id"),
    "checked at": pgettext_lazy("admin", "checked at"),
    "checked by": pgettext_lazy("admin", "checked by"),
    "count": pgettext_lazy("admin", "count"),
    "created at": pgettext_lazy("admin", "created at"),
    "created by": pgettext_lazy("admin", "created by"),
    "deployment": pgettext_lazy("admin", "deployment"),
    "detected at": pgettext_lazy("admin", "detected at"),
    "document id": pgettext_lazy("admin", "document id"),
    "drafted at": pgettext_lazy("admin", "drafted at"),
    "event id": pgettext_lazy("admin", "event id"),
    "evidence": pgettext_lazy("admin", "evidence"),
    "finished at": pgettext_lazy("admin", "finished at"),
    "first read at": pgettext_lazy("admin", "first read at"),
    "flagged at": pgettext_lazy("admin", "flagged at"),
    "followed up at": pgettext_lazy("admin", "followed up at"),
    "followed up by": pgettext_lazy("admin", "followed up by"),
    "found by": pgettext_lazy("admin", "found by"),
    "has newer": pgettext_lazy("admin", "has newer"),
    "hash": pgettext_lazy("admin", "hash"),
    "hits": pgettext_lazy("admin", "hits"),
    "holder": pgettext_lazy("admin", "holder"),
    "id": pgettext_lazy("admin", "id"),
    "imported at": pgettext_lazy("admin", "imported at"),
    "imported by": pgettext_lazy("admin", "imported by"),
    "incident": pgettext_lazy("admin", "incident"),
    "investigation": pgettext_lazy("admin", "investigation"),
    "item id": pgettext_lazy("admin", "item id"),
    "item type": pgettext_lazy("admin", "item type"),
    "key": pgettext_lazy("admin", "key"),
    "kind": pgettext_lazy("admin", "kind"),
    "last seen": pgettext_lazy("admin", "last seen"),
    "last used at": pgettext_lazy("admin", "last used at"),
    "lesson a": pgettext_lazy("admin", "lesson a"),
    "lesson b": pgettext_lazy("admin", "lesson b"),
    "lesson type": pgettext_lazy("admin", "lesson type"),
    "mail": pgettext_lazy("admin", "mail"),
    "memory": pgettext_lazy("admin", "memory"),
    "merged at": pgettext_lazy("admin", "merged at"),
    "merged by": pgettext_lazy("admin", "merged by"),
    "multi version": pgettext_lazy("admin", "multi version"),
    "name": pgettext_lazy("admin", "name"),
    "outcome": pgettext_lazy("admin", "outcome"),
    "owner": pgettext_lazy("admin", "owner"),
    "password by creator": pgettext_lazy("admin", "password by creator"),
    "pattern": pgettext_lazy("admin", "pattern"),
    "pattern kind": pgettext_lazy("admin", "pattern kind"),
    "period index": pgettext_lazy("admin", "period index"),
    "period seconds": pgettext_lazy("admin", "period seconds"),
    "position": pgettext_lazy("admin", "position"),
    "prefix": pgettext_lazy("admin", "prefix"),
    "proposed at": pgettext_lazy("admin", "proposed at"),
    "provider": pgettext_lazy("admin", "provider"),
    "public id": pgettext_lazy("admin", "public id"),
    "published at": pgettext_lazy("admin", "published at"),
    "read at": pgettext_lazy("admin", "read at"),
    "reason": pgettext_lazy("admin", "reason"),
    "registered at": pgettext_lazy("admin", "registered at"),
    "registered by": pgettext_lazy("admin", "registered by"),
    "reported at": pgettext_lazy("admin", "reported at"),
    "reported by": pgettext_lazy("admin", "reported by"),
    "resolution": pgettext_lazy("admin", "resolution"),
    "resolved by": pgettext_lazy("admin", "resolved by"),
    "revoked at": pgettext_lazy("admin", "revoked at"),
    "revoked by": pgettext_lazy("admin", "revoked by"),
    "rule contested": pgettext_lazy("admin", "rule contested"),
    "run id": pgettext_lazy("admin", "run id"),
    "run id text": pgettext_lazy("admin", "run id text"),
    "scope": pgettext_lazy("admin", "scope"),
    "scope key": pgettext_lazy("admin", "scope key"),
    "sent at": pgettext_lazy("admin", "sent at"),
    "similarity": pgettext_lazy("admin", "similarity"),
    "since": pgettext_lazy("admin", "since"),
    "skill": pgettext_lazy("admin", "skill"),
    "skill id": pgettext_lazy("admin", "skill id"),
    "source id": pgettext_lazy("admin", "source id"),
    "stamp": pgettext_lazy("admin", "stamp"),
    "started at": pgettext_lazy("admin", "started at"),
    "state": pgettext_lazy("admin", "state"),
    "status": pgettext_lazy("admin", "status"),
    "store": pgettext_lazy("admin", "store"),
    "subject": pgettext_lazy("admin", "subject"),
    "submitted by": pgettext_lazy("admin", "submitted by"),
    "target": pgettext_lazy("admin", "target"),
    "tenant": pgettext_lazy("admin", "tenant"),
    "term": pgettext_lazy("admin", "term"),
    "thread id": pgettext_lazy("admin", "thread id"),
    "threshold": pgettext_lazy("admin", "threshold"),
    "ticket id": pgettext_lazy("admin", "ticket id"),
    "ticket set": pgettext_lazy("admin", "ticket set"),
    "tickets": pgettext_lazy("admin", "tickets"),
    "title": pgettext_lazy("admin", "title"),
    "token": pgettext_lazy("admin", "token"),
    "tool calls": pgettext_lazy("admin", "tool calls"),
    "updated at": pgettext_lazy("admin", "updated at"),
    "user": pgettext_lazy("admin", "user"),
    "valid from": pgettext_lazy("admin", "valid from"),
    "valid to": pgettext_lazy("admin", "valid to"),
    "worker id": pgettext_lazy("admin", "worker id"),
    "submitted at": pgettext_lazy("admin", "submitted at"),
    "approved at": pgettext_lazy("admin", "approved at"),
    "approved by": pgettext_lazy("admin", "approved by"),
    "version": pgettext_lazy("admin", "version"),
    "summary": pgettext_lazy("admin", "summary"),
    "content": pgettext_lazy("admin", "content"),
    "digest": pgettext_lazy("admin", "digest"),
    "doc key": pgettext_lazy("admin", "doc key"),
    "role": pgettext_lazy("admin", "role"),
    "stores": pgettext_lazy("admin", "stores"),
    "submitted via": pgettext_lazy("admin", "submitted via"),
    "supersedes": pgettext_lazy("admin", "supersedes"),
    "superseded by": pgettext_lazy("admin", "superseded by"),
}


def admin_names_install() -> None:
    """Name every product app, model and field in the reader's language."""
    for label in PRODUCT_APPS:
        config = apps.get_app_config(label)
        if label in APP_NAMES:
            config.verbose_name = APP_NAMES[label]
        for model in config.get_models():
            names = MODEL_NAMES.get(model._meta.label_lower)
            if names is not None:
                model._meta.verbose_name, model._meta.verbose_name_plural = names
            for field in model._meta.get_fields():
                # Only names Django derived (a field declared with its own name keeps it).
                if isinstance(field, Field) and field._verbose_name is None:  # type: ignore[attr-defined]
                    name = COLUMN_NAMES.get(str(field.verbose_name))
                    if name is not None:
                        field.verbose_name = name
