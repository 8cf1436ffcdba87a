"""The pool sizes' change rows (leasing.PoolSize), folded into one row per pool key.

The node triggers of leasing 0027 append a row per key for every statement that changes a key's
nodes or GPUs; a search sums them. Folding deletes the rows this transaction sees and inserts
their sums in the same statement, so the sums never change: a row appended meanwhile by another
transaction is not seen, stays and is folded next time, and two folds running at once each fold
only the rows they deleted themselves (the second waits for the first's deletes, then skips
those rows). Keys whose rows sum to nothing keep no row.
"""

from __future__ import annotations

from django.db import connection, transaction

# Rows deleted less rows inserted, counted by the folding statement itself: a count taken in a
# statement before it would also see rows appended in between, which this fold leaves alone.
_FOLD_SQL = """
WITH folded AS (
  DELETE FROM leasing_poolsize
  RETURNING site_id, gpu_model_id, nvlink, infiniband, nodes, gpus
), summed AS (
  INSERT INTO leasing_poolsize (site_id, gpu_model_id, nvlink, infiniband, nodes, gpus)
  SELECT site_id, gpu_model_id, nvlink, infiniband, sum(nodes), sum(gpus)
  FROM folded
  GROUP BY site_id, gpu_model_id, nvlink, infiniband
  HAVING sum(nodes) <> 0 OR sum(gpus) <> 0
  RETURNING 1
)
SELECT (SELECT count(*) FROM folded) - (SELECT count(*) FROM summed)"""


@transaction.atomic
def pool_sizes_compact() -> int:
    """Fold the pool sizes' rows into one per key; returns how many rows there are fewer."""
    with connection.cursor() as cursor:
        cursor.execute(_FOLD_SQL)
        (fewer,) = cursor.fetchone()
        return int(fewer)
