"""Outgoing webhooks: where one may go (no private addresses unless listed, checked again at
each delivery), how it is signed (Standard Webhooks) and how one attempt is made."""

from app.webhooks.delivery import Attempt, deliver
from app.webhooks.signing import signed_headers
from app.webhooks.targets import Target, TargetRefused, Unsendable, check_target, resolve

__all__ = [
    "Attempt",
    "Target",
    "TargetRefused",
    "Unsendable",
    "check_target",
    "deliver",
    "resolve",
    "signed_headers",
]
