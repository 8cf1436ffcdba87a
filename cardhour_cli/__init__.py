"""`cardhour`: the command-line client of the Cardhour API (HTTP only, no Django)."""

__version__ = "0.1.0"
