"""Choices used by the accounts models."""

from django.db import models


class Role(models.TextChoices):
    """What a member may do inside their organization."""

    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class KeyScope(models.TextChoices):
    """What an API key may do: read only, or read and write."""

    READ = "read", "Read"
    WRITE = "write", "Read and write"
