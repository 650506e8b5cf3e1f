"""The detection post-processing passes (OD API)."""
