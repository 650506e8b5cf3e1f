"""What a run reports beyond the JSON report: the self-contained HTML page (:mod:`.html`)."""
