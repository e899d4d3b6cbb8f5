from django.urls import path

from investigations import views

app_name = "investigations"
urlpatterns = [
    path("", views.investigation_new, name="investigation-new"),
    path("<int:pk>/", views.investigation_detail, name="investigation-detail"),
    path("runs/<int:pk>/", views.request_detail, name="request-detail"),
]
