"""Planning: which files a scan (or a rewrite) reads, with which deletes. Never touches the device."""
