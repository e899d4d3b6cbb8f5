from django.urls import path

from evaluation import views

app_name = "evaluation"
urlpatterns = [
    path("", views.report_list, name="report-list"),
    path("<int:pk>/", views.report_detail, name="report-detail"),
    path("<int:pk>/chart.png", views.report_chart_png, name="report-chart"),
    path("<int:pk>/report.json", views.report_json, name="report-json"),
]
