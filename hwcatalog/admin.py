from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import path, reverse
from simple_history.admin import SimpleHistoryAdmin

from hwcatalog import services
from hwcatalog.importers.config_file import ConfigFileError, read_config_file
from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
from hwcatalog.references import catalog_row_references
from hwcatalog.validation import SLUG_PATTERN


class InUseRowsProtected:
    """The admin refuses to delete a row a stored plan used, as the API does (hwcatalog.services.
    catalog_row_delete): what uses it is listed as protected, which makes the delete page refuse."""

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        in_use = [use for obj in objs for use in catalog_row_references(row=obj)]
        return deleted, counts, perms_needed, [*protected, *in_use]


class OfferingInline(admin.TabularInline):
    model = Offering
    extra = 0
    can_delete = False  # deleted on the offering's own page, which checks what uses it
    fields = ["slug", "provider", "pricing_model", "usd_per_chip_hour", "purchase_usd_per_chip", "as_of", "source"]


@admin.register(Chip)
class ChipAdmin(InUseRowsProtected, SimpleHistoryAdmin):
    list_display = ["slug", "vendor", "kind", "memory_capacity_bytes", "memory_bandwidth_bytes_per_s", "peak_bf16_flops_per_s", "as_of"]
    list_filter = ["kind", "vendor"]
    search_fields = ["slug", "name", "vendor"]
    inlines = [OfferingInline]


@admin.register(Offering)
class OfferingAdmin(InUseRowsProtected, SimpleHistoryAdmin):
    list_display = ["slug", "chip", "provider", "pricing_model", "usd_per_chip_hour", "purchase_usd_per_chip", "as_of"]
    list_filter = ["pricing_model", "provider", "chip__kind"]
    search_fields = ["slug", "provider", "chip__slug", "region"]
    autocomplete_fields = ["chip"]


class HfConfigForm(forms.Form):
    slug = forms.RegexField(SLUG_PATTERN, max_length=80)
    name = forms.CharField(max_length=200, required=False)
    config_file = forms.FileField(help_text="A Hugging Face config.json")

    def clean_config_file(self):
        try:
            return read_config_file(self.cleaned_data["config_file"])
        except ConfigFileError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(ServingEngine)
class ServingEngineAdmin(SimpleHistoryAdmin):
    """Serving engines and their sourced scheduler defaults (read-only in the API). Plans store the engine's
    name with each row, so deleting one changes no stored plan; new plans stop using its defaults."""

    list_display = ["slug", "name", "kv_memory_rule", "kv_memory_fraction", "max_batch_sequences", "prefill_token_budget", "profile", "as_of"]
    search_fields = ["slug", "name"]


@admin.register(ModelArch)
class ModelArchAdmin(InUseRowsProtected, SimpleHistoryAdmin):
    list_display = ["slug", "family", "total_params", "active_params", "attention_kind", "generation_kind", "as_of"]
    list_filter = ["family", "attention_kind", "generation_kind", "ffn_kind"]
    search_fields = ["slug", "name", "family"]
    change_list_template = "admin/hwcatalog/modelarch/change_list.html"

    def get_urls(self):
        custom = [path("import-hf/", self.admin_site.admin_view(self.import_hf_view), name="hwcatalog_modelarch_import_hf")]
        return custom + super().get_urls()

    def import_hf_view(self, request):
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = HfConfigForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                model, style = services.model_import_hf(
                    config=form.cleaned_data["config_file"], slug=form.cleaned_data["slug"], name=form.cleaned_data["name"] or None
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(None, f"{field}: {' '.join(errors)}")
            else:
                messages.success(request, f"Imported {model.slug} ({style} style, {model.total_params / 1e9:.2f}B parameters).")
                return redirect(reverse("admin:hwcatalog_modelarch_change", args=[model.pk]))
        context = {**self.admin_site.each_context(request), "form": form, "title": "Import a model from config.json", "opts": self.model._meta}
        return render(request, "admin/hwcatalog/modelarch/import_hf.html", context)
