"""Each user manages their own API tokens. Listing needs credentials (not public); creating and
revoking are writes: a write-scoped token or a staff session. Another user's token is a 404.
A catalog-scoped token is made by staff only (accounts.permissions.may_create_token)."""
from __future__ import annotations

from datetime import timedelta

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import selectors, services
from accounts.models import ApiToken
from accounts.permissions import CATALOG_TOKEN_NEEDS_STAFF, WriteTokenOrStaff, may_create_token
from inputs.serializers import StrictSerializer


class ApiTokenSerializer(serializers.ModelSerializer):
    active = serializers.SerializerMethodField(help_text="Neither revoked nor expired.")

    class Meta:
        model = ApiToken
        fields = ["prefix", "name", "scope", "active", "created_at", "last_used_at", "expires_at", "revoked_at"]
        read_only_fields = fields

    def get_active(self, token: ApiToken) -> bool:
        return token.is_active()


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    key = serializers.SerializerMethodField(help_text="The whole key, `hwp_<prefix>_<secret>`: shown this once, never again.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]

    def get_key(self, token: ApiToken) -> str:
        return self.context["key"]


class ApiTokenInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, help_text="What the token is for.")
    scope = serializers.ChoiceField(
        choices=ApiToken.Scope.choices, default=ApiToken.Scope.READ,
        help_text="read; write (plans, validations, your tokens); catalog (also catalog writes: staff only, 403 otherwise).",
    )
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=3650, required=False, allow_null=True, help_text="Days until it expires; none: never."
    )


def _own_token_or_404(request, prefix: str) -> ApiToken:
    try:
        return selectors.api_token_get(prefix=prefix, user=request.user)
    except ApiToken.DoesNotExist:
        raise Http404("No such API token of yours.") from None


class ApiTokenListCreateApi(ListAPIView):
    """Your API tokens, newest first, without their keys; POST creates one and shows its key once."""

    serializer_class = ApiTokenSerializer
    permission_classes = [IsAuthenticated, WriteTokenOrStaff]
    filter_backends: list = []

    def get_queryset(self):
        return selectors.api_token_list(user=self.request.user)

    @extend_schema(request=ApiTokenInputSerializer, responses={201: ApiTokenCreatedSerializer})
    def post(self, request):
        inputs = ApiTokenInputSerializer(data=request.data)
        inputs.is_valid(raise_exception=True)
        if not may_create_token(request, scope=inputs.validated_data["scope"]):
            raise exceptions.PermissionDenied(CATALOG_TOKEN_NEEDS_STAFF)
        days = inputs.validated_data.get("expires_in_days")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        token, key = services.api_token_create(request.user, inputs.validated_data["name"], inputs.validated_data["scope"], expires_at)
        return Response(ApiTokenCreatedSerializer(token, context={"key": key}).data, status=status.HTTP_201_CREATED)


class ApiTokenDetailApi(APIView):
    permission_classes = [IsAuthenticated, WriteTokenOrStaff]

    @extend_schema(responses={200: ApiTokenSerializer})
    def get(self, request, prefix: str):
        return Response(ApiTokenSerializer(_own_token_or_404(request, prefix)).data)


class ApiTokenRevokeApi(APIView):
    """Revoke one of your tokens from now on (the token in use too, if it is that one). Revoking a
    revoked token changes nothing."""

    permission_classes = [IsAuthenticated, WriteTokenOrStaff]

    @extend_schema(request=None, responses={200: ApiTokenSerializer})
    def post(self, request, prefix: str):
        token = services.api_token_revoke(_own_token_or_404(request, prefix), by=request.user)
        return Response(ApiTokenSerializer(token).data)
