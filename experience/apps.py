from django.apps import AppConfig


class ExperienceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experience"
    verbose_name = "Experience memory"

    def ready(self) -> None:
        from experience.cases.models import Case, Skill
        from experience.index import vectors
        from experience.index.tasks import expanded_refresh_queue
        from experience.lessons.models import Lesson
        from experience.pages.titles import title_resolvers_install
        from experience.review.claimable import claimables_install
        from experience.review.documents import document_revocation_preview, document_revoke
        from knowledge.events import LexiconChanged
        from knowledge.hooks import DocumentRevocation, document_revocation_install
        from reviewconsole.audit import audited_models_register
        from reviewconsole.dispatch import dispatch_subscribe
        from semantic.spaces import space_register

        # The retrieval index follows the lexicon, below it, in the change's transaction
        # (docs/architecture.md, "Events"). Review decisions call the index by name.
        dispatch_subscribe(LexiconChanged, expanded_refresh_queue)

        # Knowledge's edges (its pages, admin and import) revoke a document through
        # experience's revocation, which stores the runs whose tool results cited it; its
        # revoke pages show them before it is confirmed.
        document_revocation_install(
            DocumentRevocation(revoke=document_revoke, preview=document_revocation_preview)
        )

        # Cases, skills and lessons are written only by services that record their submission.
        audited_models_register(Case, Skill, Lesson)

        # Item mentions on console pages show titles, resolved in batch (reviewconsole.itemrefs).
        title_resolvers_install()

        # Reviewers claim items under review (reviewconsole.claims): how a claim finds each kind.
        claimables_install()

        # The retrieval index keeps vectors of its entries (the vector branch of retrieval).
        space_register(vectors.SPACE)
