"""The fleet's logs in the text and HTML of ``report`` and ``whatif``: which logs were counted, which
were excluded and why (a log that does not verify is never merged silently)."""

from __future__ import annotations

from otel_route_shadow.analysis import Fleet, FleetLog
from otel_route_shadow.cli.text_table import html_text

__all__ = ["fleet_html", "fleet_lines"]


def _log_line(log: FleetLog) -> str:
    name = log.origin or "(no origin)"
    if log.included:
        beyond = log.records - log.size
        tail = f", {beyond} record(s) after its checkpoint not yet counted" if beyond > 0 else ""
        counted = f"{log.counted} records counted" + (
            f" from seq {log.start} (pruned: the records below it are in no figure)" if log.start else ""
        )
        return f"{name}: {log.path}: {counted} (verified against its checkpoint{tail})"
    return f"{name}: {log.path}: EXCLUDED from every figure: {log.reason}"


def _tally(fleet: Fleet) -> str:
    pruned = f", {len(fleet.pruned)} pruned (counted from their minimum index)" if fleet.pruned else ""
    return f"fleet: {len(fleet.logs)} logs, {len(fleet.included)} counted, {len(fleet.excluded)} excluded{pruned}"


def fleet_lines(fleet: Fleet) -> list[str]:
    """One line for the fleet, one per log; excluded logs marked ``!``."""
    out = [f"{_tally(fleet)}; each log: {fleet.checked_with()}"]
    out.extend(f"{' ' if log.included else '!'} host {_log_line(log)}" for log in fleet.logs)
    followed = fleet.followed
    if followed is not None:
        out.append(
            f"state: {len(followed.extended)} log(s) extended from the state file (only their new records "
            f"read), {len(followed.rebuilt)} read in full"
        )
        out.extend(f"! state: {warning}" for warning in followed.warnings)
    return out


def fleet_html(fleet: Fleet) -> str:
    """The fleet's logs as a table, excluded ones highlighted (every value escaped)."""
    rows = "".join(
        f'<tr{"" if log.included else " class=flag"}><td class="key">{html_text(log.origin or "(no origin)")}</td>'
        f'<td class="key"><code>{html_text(log.path)}</code></td>'
        f"<td>{log.counted}</td><td>{log.start if log.included else ''}</td><td>{log.records}</td>"
        f'<td class="key">{"counted" if log.included else html_text("EXCLUDED: " + (log.reason or ""))}</td></tr>'
        for log in fleet.logs
    )
    return (
        '<section class="evidence" aria-label="fleet">'
        f"<p>{html_text(_tally(fleet))}; each log: {html_text(fleet.checked_with())}</p>"
        "<table><thead><tr><th>host (origin)</th><th>chain</th><th>records counted</th><th>from seq</th>"
        f"<th>chain records</th><th>status</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )
