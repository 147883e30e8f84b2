from __future__ import annotations

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from accounts import services
from accounts.throttling import BadKeyRateThrottle


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token hwp_<prefix>_<secret>`. request.user is the token's user and
    request.auth the ApiToken. The keyword stays `Token`, as with DRF's authtoken before, so
    clients need no change but a new key."""

    keyword = "Token"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None  # another scheme, or none: let the next authentication try
        # Checked before the key is read: an address over its rate of bad keys gets a 429 and no query.
        throttle = BadKeyRateThrottle()
        if not throttle.peek(request):
            raise Throttled(wait=throttle.wait())
        try:
            return self._authenticate_key(parts)
        except AuthenticationFailed:
            throttle.count(request)
            raise

    def _authenticate_key(self, parts: list[bytes]):
        if len(parts) == 1:
            raise AuthenticationFailed("Invalid token header: no key given.")
        if len(parts) > 2:
            raise AuthenticationFailed("Invalid token header: the key must not contain spaces.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(services.MALFORMED) from None
        try:
            token = services.api_token_authenticate(key=key)
        except services.InvalidApiToken as exc:
            raise AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request) -> str:
        # Makes DRF answer a request without credentials 401 (with WWW-Authenticate), not 403.
        return self.keyword
