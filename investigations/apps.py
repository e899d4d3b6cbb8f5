from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        from investigations.metrics import gauges_register

        # /metrics: investigations by status, and the console's background requests by state.
        gauges_register()
