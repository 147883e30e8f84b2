"""API tokens: hashed at rest, scoped read or write, revocable, expiring; the tokens endpoints,
commands and admin. Alice has a write token (token_client) and a read token (read_token_client);
Bob is another user; Sam is staff."""
from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import MAX_ACTIVE_TOKENS_PER_USER, api_token_create, api_token_revoke
from hwcatalog.models import Chip
from tests.conftest import client_with_token

NEW_CHIP = {
    "slug": "acme-x1", "vendor": "Acme", "name": "X1", "kind": "gpu", "memory_capacity_bytes": 64_000_000_000,
    "memory_bandwidth_bytes_per_s": 2.0e12, "peak_bf16_flops_per_s": 500e12, "as_of": "2026-01-01",
    "sources": ["https://example.com/acme-x1-datasheet.pdf"],
}  # fmt: skip


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob-the-other", password="bob-password-1234")


def _command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- keys at rest ----------------------------------------------------------------------


def test_the_database_stores_no_plaintext_key(alice):
    token, key = api_token_create(alice, "ci", "write")
    secret = key.split("_", 2)[2]
    for column, value in ApiToken.objects.filter(pk=token.pk).values().get().items():
        assert key not in str(value) and secret not in str(value), column
    assert token.key_hash == hashlib.sha256(secret.encode()).hexdigest()


def test_a_key_is_hwp_then_its_public_prefix_then_a_random_secret(alice):
    token, key = api_token_create(alice, "ci", "read")
    _, other = api_token_create(alice, "ci", "read")
    assert key.startswith(f"hwp_{token.prefix}_") and len(token.prefix) == 12
    assert len(key.split("_", 2)[2]) == 43  # 32 bytes from secrets, URL-safe base64
    assert key != other


def test_a_token_cannot_be_created_already_expired_or_with_a_made_up_scope(alice):
    with pytest.raises(ValidationError, match="future"):
        api_token_create(alice, "ci", "write", timezone.now() - timedelta(days=1))
    with pytest.raises(ValidationError, match="scope"):
        api_token_create(alice, "ci", "admin")
    assert not ApiToken.objects.exists()


def test_a_user_has_at_most_a_fixed_number_of_active_tokens(alice):
    tokens = [api_token_create(alice, f"t{i}", "read")[0] for i in range(MAX_ACTIVE_TOKENS_PER_USER)]
    with pytest.raises(ValidationError, match="revoke one first"):
        api_token_create(alice, "one more", "read")
    api_token_revoke(tokens[0])
    api_token_create(alice, "one more", "read")


# --- scopes ----------------------------------------------------------------------------


def test_a_write_token_writes(token_client):
    assert token_client.post("/api/v1/tokens/", {"name": "ci"}, format="json").status_code == 201
    assert ApiToken.objects.filter(name="ci").exists()  # the catalog needs more: tests/accounts/test_ownership.py


def test_a_read_token_reads_but_a_write_is_403_read_only(catalog, read_token_client):
    assert read_token_client.get("/api/v1/chips/").status_code == 200
    response = read_token_client.post("/api/v1/chips/", NEW_CHIP, format="json")
    assert response.status_code == 403
    assert response.json()["detail"].startswith("This API token is read-only")
    assert not Chip.objects.filter(slug="acme-x1").exists()


def test_a_read_token_of_a_staff_user_still_cannot_write(db):
    sam = get_user_model().objects.create_user("sam", is_staff=True)
    client = client_with_token(api_token_create(sam, "dashboard", "read")[1])
    assert client.post("/api/v1/chips/", NEW_CHIP, format="json").status_code == 403


def test_an_anonymous_write_gets_401_asking_for_a_token(db, anonymous_client):
    response = anonymous_client.post("/api/v1/chips/", NEW_CHIP, format="json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


# --- keys that do not authenticate ------------------------------------------------------


def test_a_revoked_token_gets_401_and_changes_nothing(alice):
    token, key = api_token_create(alice, "ci", "write")
    api_token_revoke(token)
    response = client_with_token(key).post("/api/v1/chips/", NEW_CHIP, format="json")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]
    assert not Chip.objects.filter(slug="acme-x1").exists()
    assert client_with_token(key).get("/api/v1/chips/").status_code == 401  # a bad key is never read as anonymous


def test_an_expired_token_gets_401(alice):
    token, key = api_token_create(alice, "ci", "write", timezone.now() + timedelta(days=1))
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client_with_token(key).get("/api/v1/chips/")
    assert response.status_code == 401 and "expired" in response.json()["detail"]


def test_the_token_of_an_inactive_user_gets_401(alice):
    _, key = api_token_create(alice, "ci", "write")
    alice.is_active = False
    alice.save()
    assert client_with_token(key).get("/api/v1/chips/").status_code == 401


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Token", "no key given"),
        ("Token hwp_0123456789ab_x y", "must not contain spaces"),
        ("Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", "Malformed API token"),  # an old authtoken key
        ("Token hwp_XYZ_" + "a" * 43, "Malformed API token"),
        ("Token hwp_0123456789ab_" + "a" * 43, "Invalid API token."),
        ("Token hwp_0123456789ab_" + "é" * 43, "Malformed API token"),
    ],
)
def test_a_malformed_or_unknown_key_gets_401_saying_why(db, anonymous_client, header, message):
    anonymous_client.credentials(HTTP_AUTHORIZATION=header)
    response = anonymous_client.get("/api/v1/chips/")
    assert response.status_code == 401 and message in response.json()["detail"]
    assert response["WWW-Authenticate"] == "Token"


def test_a_wrong_secret_reads_the_same_as_an_unknown_prefix(alice):
    token, key = api_token_create(alice, "ci", "write")
    wrong = f"hwp_{token.prefix}_" + ("A" if key[-1] != "A" else "B") * 43
    assert client_with_token(wrong).get("/api/v1/chips/").json() == {"detail": "Invalid API token."}


def test_last_used_is_written_at_most_once_a_minute(alice):
    token, key = api_token_create(alice, "ci", "read")
    client = client_with_token(key)
    client.get("/api/v1/chips/")
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    client.get("/api/v1/chips/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/v1/chips/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


# --- the tokens endpoints ---------------------------------------------------------------


def test_the_tokens_list_shows_only_your_own_tokens_and_never_a_key(alice, bob, token_client):
    mine, my_key = api_token_create(alice, "laptop", "read")
    api_token_create(bob, "bob's", "write")
    response = token_client.get("/api/v1/tokens/")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert {row["name"] for row in rows} == {"procurement tool", "laptop"}
    assert all("key" not in row and "key_hash" not in row for row in rows)
    assert my_key.split("_", 2)[2] not in response.content.decode() and "bob" not in response.content.decode()
    assert token_client.get(f"/api/v1/tokens/{mine.prefix}/").json()["active"] is True


def test_the_tokens_list_is_not_public(db, anonymous_client):
    assert anonymous_client.get("/api/v1/tokens/").status_code == 401


def test_a_write_token_creates_a_token_whose_key_is_shown_once_and_works(alice, token_client):
    response = token_client.post("/api/v1/tokens/", {"name": "grafana", "scope": "read", "expires_in_days": 30}, format="json")
    assert response.status_code == 201
    created = response.json()
    assert created["scope"] == "read" and created["key"].startswith(f"hwp_{created['prefix']}_")
    token = ApiToken.objects.get(prefix=created["prefix"])
    assert token.user == alice and timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert "key" not in token_client.get(f"/api/v1/tokens/{token.prefix}/").json()
    assert client_with_token(created["key"]).get("/api/v1/tokens/").status_code == 200


def test_a_token_made_through_the_api_is_read_only_unless_asked(token_client):
    assert token_client.post("/api/v1/tokens/", {"name": "x"}, format="json").json()["scope"] == "read"


def test_a_read_token_cannot_mint_tokens(read_token_client):
    response = read_token_client.post("/api/v1/tokens/", {"name": "escalate", "scope": "write"}, format="json")
    assert response.status_code == 403 and "read-only" in response.json()["detail"]
    assert ApiToken.objects.count() == 1


def test_a_staff_session_creates_tokens_and_another_session_only_lists(staff_client, session_client):
    assert staff_client.post("/api/v1/tokens/", {"name": "sam's script", "scope": "write"}, format="json").status_code == 201
    assert session_client.get("/api/v1/tokens/").json()["results"] == []
    assert session_client.post("/api/v1/tokens/", {"name": "bob's script"}, format="json").status_code == 403


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "write"}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "x", "scope": "admin"}, "scope"),
        ({"name": "x", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "x", "expires_in_days": "soon"}, "expires_in_days"),
    ],
)
def test_bad_token_input_is_a_400_naming_the_field(token_client, body, field):
    response = token_client.post("/api/v1/tokens/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert ApiToken.objects.count() == 1


def test_a_user_revokes_their_own_token_and_it_stops_working(alice, token_client):
    laptop, key = api_token_create(alice, "laptop", "write")
    response = token_client.post(f"/api/v1/tokens/{laptop.prefix}/revoke/")
    assert response.status_code == 200 and response.json()["active"] is False and response.json()["revoked_at"]
    laptop.refresh_from_db()
    assert laptop.revoked_by == alice
    assert client_with_token(key).get("/api/v1/tokens/").status_code == 401
    again = token_client.post(f"/api/v1/tokens/{laptop.prefix}/revoke/")
    assert again.status_code == 200 and again.json()["revoked_at"] == response.json()["revoked_at"]


def test_someone_elses_token_is_a_404_and_stays_valid(bob, token_client):
    bobs, key = api_token_create(bob, "bob's", "write")
    assert token_client.get(f"/api/v1/tokens/{bobs.prefix}/").status_code == 404
    assert token_client.post(f"/api/v1/tokens/{bobs.prefix}/revoke/").status_code == 404
    assert client_with_token(key).get("/api/v1/tokens/").status_code == 200


def test_a_read_token_cannot_revoke(alice, read_token_client):
    other, _ = api_token_create(alice, "other", "write")
    assert read_token_client.post(f"/api/v1/tokens/{other.prefix}/revoke/").status_code == 403
    other.refresh_from_db()
    assert other.revoked_at is None


# --- commands ---------------------------------------------------------------------------


def test_createtoken_prints_only_the_key_and_makes_a_write_token_by_default(db):
    out, err = _command("createtoken", "loadtest")
    key = out.strip()
    token = ApiToken.objects.get()
    assert key.startswith(f"hwp_{token.prefix}_") and out.count("\n") == 1
    assert token.scope == "write" and token.user.username == "loadtest" and not token.user.has_usable_password()
    assert "shown this once" in err
    assert client_with_token(key).post("/api/v1/tokens/", {"name": "second"}, format="json").status_code == 201


def test_createtoken_takes_a_scope_name_expiry_and_staff(db):
    _command("createtoken", "sam", "--scope", "read", "--name", "grafana", "--expires-days", "7", "--staff")
    token = ApiToken.objects.get()
    assert (token.scope, token.name, token.user.is_staff) == ("read", "grafana", True)
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)


def test_createtoken_rotate_revokes_the_users_other_tokens(alice):
    old, _ = api_token_create(alice, "old", "write")
    _command("createtoken", "alice", "--rotate")
    old.refresh_from_db()
    assert old.revoked_at is not None
    assert ApiToken.objects.filter(user=alice, revoked_at__isnull=True).count() == 1


def test_createtoken_refuses_a_bad_scope_or_expiry(db):
    with pytest.raises(CommandError):
        _command("createtoken", "x", "--scope", "admin")
    with pytest.raises(CommandError, match="expires-days"):
        _command("createtoken", "x", "--expires-days", "0")
    assert not ApiToken.objects.exists()


def test_listtokens_shows_every_token_without_a_secret(alice, bob):
    _, alices_key = api_token_create(alice, "ci", "write")
    bobs, _ = api_token_create(bob, "bob's", "read")
    api_token_revoke(bobs)
    everyone, _ = _command("listtokens")
    assert "alice" in everyone and "bob-the-other" in everyone and "revoked" in everyone and "active" in everyone
    assert alices_key.split("_", 2)[2] not in everyone
    only_bob, _ = _command("listtokens", "bob-the-other")
    assert "alice" not in only_bob and f"hwp_{bobs.prefix}" in only_bob


def test_revoketoken_by_prefix_or_all_of_a_user(alice):
    one, one_key = api_token_create(alice, "one", "write")
    api_token_create(alice, "two", "write")
    api_token_create(alice, "three", "write")
    out, _ = _command("revoketoken", f"hwp_{one.prefix}")
    assert "Revoked" in out and client_with_token(one_key).get("/api/v1/chips/").status_code == 401
    out, _ = _command("revoketoken", "--user", "alice", "--all")
    assert "Revoked 2 token(s)" in out
    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()
    with pytest.raises(CommandError, match="No API token"):
        _command("revoketoken", "0123456789ab")


# --- admin -----------------------------------------------------------------------------


@pytest.fixture
def admin_client_(db, client):
    admin = get_user_model().objects.create_superuser("root", password="root-password-1234")
    client.force_login(admin)
    return client


def test_the_admin_lists_tokens_without_their_hash_and_revokes_selected_ones(alice, admin_client_):
    token, _ = api_token_create(alice, "ci", "write")
    page = admin_client_.get("/admin/accounts/apitoken/")
    assert page.status_code == 200 and token.prefix in page.content.decode()
    assert token.key_hash not in page.content.decode()
    assert token.key_hash not in admin_client_.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    admin_client_.post("/admin/accounts/apitoken/", {"action": "revoke_selected", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by.username == "root"


def test_the_admin_cannot_create_a_token(admin_client_):
    assert admin_client_.get("/admin/accounts/apitoken/add/").status_code == 403
