"""How the maintenance asset and the health check render sizes and per-table reports in the UI."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logistics_platform.lib.maintenance import TableReport


def fmt_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB, for people."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:,.1f} {unit}" if unit != "B" else f"{int(size):,} B"
        size /= 1024
    return f"{n} B"


def report_markdown(reports: Sequence["TableReport"]) -> str:
    """A Markdown table of what maintenance did to each table."""
    lines = [
        "| table | data files before → after | stored bytes before → after | snapshots expired | "
        "bytes reclaimed | orphans removed | tags +/- | seconds | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        m = r.metadata()
        lines.append(
            f"| {r.table} | {m.get('data_files_before', '-')} → {m.get('data_files_after', '-')} | "
            f"{fmt_bytes(int(m.get('stored_bytes_before', 0)))} → {fmt_bytes(int(m.get('stored_bytes_after', 0)))} | "
            f"{m.get('snapshots_expired', 0)} | {fmt_bytes(int(m.get('bytes_reclaimed', 0)))} | "
            f"{m.get('orphan_files_removed', 0)} | {m.get('tags_created', 0)}/{m.get('tags_removed', 0)} | "
            f"{m.get('duration_s', 0)} | {r.error or 'ok'} |"
        )
    return "\n".join(lines)
