from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


@pytest.fixture
def anonymous_client() -> APIClient:
    return APIClient()


@pytest.fixture
def alice(db):
    """Alice has an API token (a procurement tool's account); she is not staff."""
    return get_user_model().objects.create_user("alice", password="not-used-1234")


@pytest.fixture
def token_client(alice) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=alice)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def staff_client(db) -> APIClient:
    """Sam is staff and uses the browser session."""
    sam = get_user_model().objects.create_user("sam", password="sam-password-1234", is_staff=True)
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(sam)
    return client


@pytest.fixture
def session_client(db) -> APIClient:
    """Bob has a login but is not staff and has no token."""
    bob = get_user_model().objects.create_user("bob", password="bob-password-1234")
    client = APIClient()
    client.force_login(bob)
    return client


@pytest.fixture
def catalog(db):
    from hwcatalog.services import catalog_load

    return catalog_load()
