"""The Iceberg spec as code: types, and (later) schemas, partitioning, metadata and manifests."""
