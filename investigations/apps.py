from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        from experience.cases.prompting import prompt_runner_install, prompt_tools_register
        from investigations.declarations import PROMPT_TOOLS
        from investigations.metrics import gauges_register
        from investigations.skills import PromptSkillRunner

        # /metrics: investigations by status, and the console's background requests by state.
        gauges_register()

        # Prompt-form skills declare investigation tools and run only through this runner
        # (docs/architecture.md, "Registries").
        prompt_tools_register(PROMPT_TOOLS)
        prompt_runner_install(PromptSkillRunner())
