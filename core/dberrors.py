"""What PostgreSQL said went wrong, from the error Django raises (psycopg's error is its cause).

Code that tells one database failure from another (a deadlock to retry, a lock wait to refuse,
a NUL byte to answer as bad input) reads the SQLSTATE here rather than matching messages or
psycopg's classes.
"""

from __future__ import annotations

# SQLSTATEs the project acts on (PostgreSQL, Appendix A).
DEADLOCK_DETECTED = "40P01"
LOCK_NOT_AVAILABLE = "55P03"
UNTRANSLATABLE_CHARACTER = "22P05"


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a database error as Django raises it; None for any other error."""
    return getattr(error.__cause__, "sqlstate", None)
