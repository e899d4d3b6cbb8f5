from django.apps import AppConfig


def document_revocation_preview(document_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking a knowledge document would reach (knowledge's revoke page asks)."""
    from experience.review.impact import revocation_impact

    return revocation_impact(document_id, tenant=tenant).as_json()


class ExperienceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experience"
    verbose_name = "Experience memory"

    def ready(self) -> None:
        from experience.cases.models import Case, Skill
        from experience.index import lesson_inputs, postings, vectors
        from experience.index.tasks import expanded_refresh_queue
        from experience.lessons.models import Lesson
        from experience.pages.titles import title_resolvers_install
        from experience.review.revocation import document_revocation_store
        from knowledge.hooks import revocation_previewer_register
        from reviewconsole.audit import audited_models_register
        from reviewconsole.dispatch import Event, dispatch_subscribe
        from semantic.spaces import space_register

        # The retrieval index follows every review decision and the lexicon, in the writer's
        # transaction (docs/architecture.md, "Events"); the writers sit below the index.
        dispatch_subscribe(Event.ITEM_STATUS_CHANGED, postings.item_status_followed)
        dispatch_subscribe(Event.ITEM_STATUS_CHANGED, lesson_inputs.case_status_followed)
        dispatch_subscribe(Event.LESSON_CONFLICT_OPENED, lesson_inputs.conflict_followed)
        dispatch_subscribe(Event.LESSON_CONFLICT_CLOSED, lesson_inputs.conflict_followed)
        dispatch_subscribe(Event.LEXICON_CHANGED, expanded_refresh_queue)

        # Revoking a knowledge document stores the runs whose tool results cited it; its revoke
        # pages show them before it is confirmed.
        dispatch_subscribe(Event.DOCUMENT_REVOKED, document_revocation_store)
        revocation_previewer_register(document_revocation_preview)

        # Cases, skills and lessons are written only by services that record their submission.
        audited_models_register(Case, Skill, Lesson)

        # Item mentions on console pages show titles, resolved in batch (reviewconsole.itemrefs).
        title_resolvers_install()

        # The retrieval index keeps vectors of its entries (the vector branch of retrieval).
        space_register(vectors.SPACE)
