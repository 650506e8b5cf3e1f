"""Mixed computation: which nodes of a graph a back end runs, cut into segments.

The partitioner places every node on the back end (the device) or the host, as the
reference's TensorFlow adapter does in mixed mode (``mix_compile_mode``), with
``in_out_pair`` ranges or by the back end's supported ops, and groups the device nodes
into cycle-free segments.  Each segment becomes a call node whose body is a library
function.  Modules:

* :mod:`.supported`: the supported-ops table (file, plugins, fused ops, default);
* :mod:`.edges`: output dtypes and argument layouts from op definitions;
* :mod:`.frames`: TF1 while-loop frames;
* :mod:`.candidates`, :mod:`.propagation`, :mod:`.in_out`: the placement rules;
* :mod:`.clusters`: cycle-free clustering; :mod:`.boundary`: what crosses a segment's border;
* :mod:`.partitioner`: the placement; :mod:`.placement`: its report;
* :mod:`.functions`, :mod:`.segments`: cutting segments out into functions and call nodes;
* :mod:`.request`: the session options that steer it; :mod:`.mixed`: a fusion run with it.
"""
from __future__ import annotations

from .errors import PartitionError
from .mixed import MixedOutput, MixedResult, MixedRun, supported_ops_for
from .partitioner import Placement, place
from .placement import HostNode, PartitionReport, SegmentSummary, build_report
from .request import PartitionRequest, parse_flag, partition_request
from .segments import SEGMENT_OP, TF_CALL_OP, SegmentGraph
from .supported import HOST_ONLY_FAMILIES, OpSupport, SupportedOps, parse_supported_ops, read_supported_ops_file

__all__ = [
    "HOST_ONLY_FAMILIES", "HostNode", "MixedOutput", "MixedResult", "MixedRun", "OpSupport", "PartitionError",
    "PartitionReport", "PartitionRequest", "Placement", "SEGMENT_OP", "SegmentGraph", "SegmentSummary",
    "SupportedOps", "TF_CALL_OP", "build_report", "parse_flag", "parse_supported_ops", "partition_request", "place",
    "read_supported_ops_file", "supported_ops_for",
]
