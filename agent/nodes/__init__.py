"""The graph's nodes: ``agent``, ``tools`` (one task per call) and ``verify``."""
