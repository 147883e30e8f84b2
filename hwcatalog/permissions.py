from __future__ import annotations

from accounts.permissions import CatalogTokenOrStaff, WriteTokenOrStaff


class ReadPublicWriteTokenOrStaff(WriteTokenOrStaff):
    """Anyone reads; a write needs a write-scoped API token, or a session of a staff user.

    The API's default permission (settings.REST_FRAMEWORK); the schema marks its reads as open
    to anonymous clients."""


class ReadPublicCatalogTokenOrStaff(CatalogTokenOrStaff):
    """Anyone reads the catalog; a write (create, change, delete, import) needs a catalog-scoped
    API token, or a session of a staff user. The schema marks its reads as open too."""


PUBLIC_READS = (ReadPublicWriteTokenOrStaff, ReadPublicCatalogTokenOrStaff)
