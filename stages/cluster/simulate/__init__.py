"""A discrete-event model of a wmforge cluster (SimPy): nodes × GPUs × slots fed by the real
allocator policy (:mod:`stages.cluster.allocator_policy`, imported, never copied), with per-node
level caches, co-resident slowdown, uploads and failures. ``wmforge cluster simulate`` writes the
25 × 8 report; every figure it prints is a prediction with its inputs attached."""
