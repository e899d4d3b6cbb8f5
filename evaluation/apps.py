from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "replay evaluation"

    def ready(self) -> None:
        from evaluation.services import heldout_approval_guard
        from experience.cases.guards import case_approval_guard_register

        case_approval_guard_register(heldout_approval_guard)
