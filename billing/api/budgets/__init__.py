"""The budgets and usage alerts API of billing: its own serializers, filters and views."""
