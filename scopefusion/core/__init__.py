"""The engine-neutral core (``graph``, ``fusion``), the engines (``scope``, ``graph_fusion``)
and verification (``verify``)."""
