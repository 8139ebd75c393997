"""The admin's front page: what waits for a person, then the ledgers.

The console is the last app: its admin module is imported once every queue is registered, so
the site is configured here (conduit.admin.site_configure) and the work rows registered as a
part of the front page."""

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from conduit.admin import site_configure
from console.dashboard import WorkRow, work_counts
from reconcile.selectors import UNEXPECTED_RECEIPTS_QUEUE

# Each front-page row: the model whose admin it opens, and the filter it opens with (or, for
# the replies to review, the admin's own page: the inbox).
WORK_LINKS = {
    "review_pending": ("replies.ReviewQueue", "inbox"),
    "unknown_sends": ("replies.UnknownSendQueue", ""),
    "quarantine": ("ingress.QuarantineReceipt", "?state__exact=QUARANTINED"),
    "retry_candidates": ("reconcile.RetryCandidateQueue", ""),
    "unexpected_receipts": ("reconcile.Finding", f"?queue={UNEXPECTED_RECEIPTS_QUEUE}"),
    "stranded_sends": ("replies.StrandedSendQueue", ""),
    "failed_scans": ("reconcile.ScanState", "?failing=yes"),
    "sources_attention": ("ingress.Source", "?attention=yes"),
    "tokens_expiring": ("ingress.Source", "?attention=token"),
}


def work_rows(request: HttpRequest, site: admin.AdminSite = admin.site) -> list[WorkRow]:
    """The front page's rows: counts for every staff member, a link where the viewer may open the queue."""
    from django.apps import apps

    rows = []
    for row in work_counts():
        label, query = WORK_LINKS[row["key"]]
        model = apps.get_model(label)
        model_admin = site._registry.get(model)
        url = ""
        if model_admin is not None and model_admin.has_view_or_change_permission(request):
            opts = model._meta
            if query and not query.startswith("?"):
                url = reverse(f"admin:{opts.app_label}_{query}")
            else:
                url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist") + query
        rows.append(WorkRow(url=url, **row))
    return rows


site_configure(admin.site)
admin.site.front_page_register("work", work_rows)
