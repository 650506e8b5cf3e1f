"""The plugin registry and kit, against real pip-installed test plugins (packages/)."""
