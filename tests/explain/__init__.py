"""explain and hints."""
