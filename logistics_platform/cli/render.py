"""What `run` prints: the progress line while the main job runs and the summary after it (pure text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logistics_platform.pipeline import SKIPPED_SHOWN

if TYPE_CHECKING:
    from logistics_platform.pipeline import Progress, Summary


def render_progress(p: Progress, width: int = 30) -> str:
    """One line: a bar over the hours, hours and lines done, the line rate and the ingest ETA (or the stage)."""
    share = p.hours_done / p.hours_total if p.hours_total else 1.0
    filled = round(share * width)
    rate = p.lines / p.elapsed_seconds if p.elapsed_seconds > 0 else 0.0
    if p.stage != "ingest":
        tail = p.stage + (f" {p.stage_seconds:.0f}s" if p.stage_seconds >= 1 else "")
    elif 0 < p.hours_done < p.hours_total:
        tail = f"ETA {p.elapsed_seconds / p.hours_done * (p.hours_total - p.hours_done):.0f}s"
    else:
        tail = "ETA -" if p.hours_done == 0 else "ingested"
    bar = f"[{'#' * filled}{'.' * (width - filled)}]"
    return f"{bar} {p.hours_done}/{p.hours_total} hours, {p.lines:,} lines, {rate:,.0f} lines/s, {tail}"


def render_summary(summary: Summary) -> str:
    """The hours and runs of the main job (each failure on its own line), then the row count of every table."""
    lines = [f"arrival hours: {len(summary.partitions)}"]
    if summary.partitions:
        lines[0] += f" ({summary.partitions[0]} .. {summary.partitions[-1]})"
    if summary.up_to_date:
        lines.append(f"up to date: {len(summary.up_to_date)} (files unchanged since their ingest, not ingested again)")
    if summary.skipped:
        lines.append(f"left out: {len(summary.skipped)} (not ingested)")
        shown = list(summary.skipped.items())[:SKIPPED_SHOWN]
        lines += [f"  {what}: {why}" for what, why in shown]
        if len(summary.skipped) > len(shown):
            lines.append(f"  ... and {len(summary.skipped) - len(shown)} more")
    failed = [r for r in summary.runs if not r.success]
    lines.append(f"runs: {len(summary.runs)} ({len(failed)} failed)")
    for job in dict.fromkeys(r.job for r in summary.runs):  # each job once, in the order of its first run
        rs = [r for r in summary.runs if r.job == job]
        lines.append(f"  {job}: {len(rs)} run{'s' if len(rs) > 1 else ''}, {sum(r.seconds for r in rs):.1f}s")
    lines += [f"  FAILED {r.job} [{r.partition}] run {r.run_id}{': ' + r.error if r.error else ''}" for r in failed]
    if summary.counts_error:
        lines.append(f"row counts unavailable: {summary.counts_error}")
    width = max([len(n) for n in (*summary.bronze, *summary.marts)] + [10])
    lines += ["", f"{'table'.ljust(width + 8)} {'rows':>12}"]
    lines += [f"{('bronze.' + n).ljust(width + 8)} {c:>12,}" for n, c in summary.bronze.items()]
    lines += [f"{('marts.' + n).ljust(width + 8)} {c:>12,}" for n, c in summary.marts.items()]
    return "\n".join(lines)
