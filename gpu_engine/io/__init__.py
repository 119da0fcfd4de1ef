"""File access: path normalisation and remapping, file IO (later: Parquet read/write, delete loading)."""
