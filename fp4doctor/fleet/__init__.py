"""Fleets: the same doctor core on every node, through the engines operators already run.

One node (`fp4doctor node`): the check, written as a Node Feature Discovery feature file, a
Prometheus node-exporter textfile and a ready file, with the exit codes of a node-problem-detector
custom plugin. Many nodes (`fp4doctor fleet`): a facts snapshot per node (a directory of them, or
one Ray task pinned to each alive node), one report: groups of identical nodes, the outliers among
them, readiness per FP4 GEMM family, and the environment each group should use.

    view      one node's report as the fleet and the node outputs see it (plain, JSON-able data)
    labels    Kubernetes label syntax and the NFD local feature file
    metrics   the Prometheus text exposition of one node
    node      run the check on this node and write its outputs atomically
    group     nodes into groups, outliers, per-family counts: the fleet report
    fleet     the nodes of a facts directory, judged offline
    fanout    one Ray task per alive node (imports ray; loaded only by `fleet --ray`)
    render    the fleet report as text and JSON
    commands  the click commands (import only click at start-up)
"""
