"""Exception hierarchy.  Every error the tool raises on purpose derives from
:class:`ScopeFusionError`, so the CLI can print one clear line for it."""
from __future__ import annotations


class ScopeFusionError(Exception):
    """Base class of every error reported to the user."""


class GraphLoadError(ScopeFusionError):
    """A model file or directory could not be read."""


class GraphValidationError(ScopeFusionError):
    """A GraphDef is malformed (duplicate names, dangling inputs, cycles)."""


class OptionError(ScopeFusionError):
    """An option value is invalid, e.g. an unknown pass name."""


class PluginError(ScopeFusionError):
    """A plugin failed to load or registered something inconsistent."""


class PassError(ScopeFusionError):
    """A pass raised while matching or generating its fusion result."""


class EmitError(ScopeFusionError):
    """The fused graph could not be turned into its TensorFlow-runnable form."""
