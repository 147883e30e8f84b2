from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class StandardPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request) -> int:
        # DRF falls back to the default for a bad page_size and caps a large one; a client that asks
        # for 1,000 rows or "ten" rows should hear it (400 naming the field), as for any other bad input.
        raw = request.query_params.get(self.page_size_query_param)
        if not raw:  # absent or empty ("?page_size="), as DRF and django-filter treat an empty parameter
            return self.page_size
        size = int(raw) if re.fullmatch(r"[0-9]{1,6}", raw) else 0
        if not 1 <= size <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [f"An integer from 1 to {self.max_page_size}."]})
        return size

    def get_page_number(self, request, paginator):
        # DRF answers 404 "Invalid page." for "?page=0", "-1" or "1e3" alike; a page number that is no page number is bad
        # input (400 naming it). A whole number past the last page stays a 404: the page is not there.
        raw = request.query_params.get(self.page_query_param)
        if raw and raw not in self.last_page_strings and not re.fullmatch(r"0*[1-9][0-9]*", raw):
            raise ValidationError({self.page_query_param: ["A whole number from 1 (or \"last\")."]})
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.page_query_param: {"minimum": 1}, self.page_size_query_param: {"minimum": 1, "maximum": self.max_page_size}}
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
