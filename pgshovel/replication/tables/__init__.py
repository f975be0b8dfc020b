"""Table formats (Delta Lake through delta-rs, Iceberg through pyiceberg) as a library.

Filled in step by step; see the README's "Table formats" section.
"""
