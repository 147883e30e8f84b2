from __future__ import annotations

from django.shortcuts import render

from hwcatalog import selectors


def home(request):
    chips = selectors.chip_list()
    models = selectors.model_list()
    return render(request, "frontend/home.html", {"chips": chips, "models": models})
