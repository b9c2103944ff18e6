"""The nodes `rendezvous peers` heard on the network, as a table or as JSON."""

from __future__ import annotations

from typing import Any, Sequence

from .advert import Advert

COLUMNS = ("NODE", "ADDRESS", "PORT", "JOB", "EXPECT", "PHASE", "TF", "GPUS")


def advert_to_dict(advert: Advert) -> dict[str, Any]:
    return {
        "node_id": advert.node_id,
        "address": str(advert.peer.address),
        "port": advert.peer.port,
        "tf_port": advert.peer.tf_port,
        "job": advert.job,
        **advert.expect.fields(),
        "phase": advert.phase.value,
        "round": advert.round,
        "coordinator": advert.coordinator,
        "tensorflow": advert.tensorflow,
        "gpus": advert.gpus,
        "data_address": str(advert.peer.data_address) if advert.peer.data_address is not None else None,
    }


def peer_table(adverts: Sequence[Advert]) -> str:
    """One row per node, columns aligned, header first; a DATA column (the data network's
    address) when a node has one."""
    data = any(a.peer.data_address is not None for a in adverts)
    rows = [COLUMNS + (("DATA",) if data else ())] + [
        (a.node_id, str(a.peer.address), str(a.peer.port), a.job, str(a.expect), a.phase.value,
         a.tensorflow or "-", a.gpus or "-") + ((str(a.peer.data_address or "-"),) if data else ())
        for a in adverts
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
