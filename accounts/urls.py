from __future__ import annotations

from django.urls import path

from accounts.apis import ApiTokenDetailApi, ApiTokenListCreateApi, ApiTokenRevokeApi

urlpatterns = [
    path("tokens/", ApiTokenListCreateApi.as_view(), name="token-list"),
    path("tokens/<str:prefix>/", ApiTokenDetailApi.as_view(), name="token-detail"),
    path("tokens/<str:prefix>/revoke/", ApiTokenRevokeApi.as_view(), name="token-revoke"),
]
