"""Deterministic Parquet writing, shared by every stage (same table → same bytes)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Deterministic Parquet: no pandas index, fixed compression, no wall-clock metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({})
    pq.write_table(table, path, compression="zstd", write_statistics=True)
