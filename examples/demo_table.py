"""The demo's closing summary for people: lines of at most 80 columns, amounts in tokens with the stake token's
symbol, the run's length as a duration, tables of counts as `name: count` lines, never a Python repr
(runs/demo/summary.json keeps base units)."""

from __future__ import annotations

from collections import defaultdict

from cli.output import duration, tokens


def summary_lines(summary: dict) -> list[str]:
    """`examples.demo`'s summary (the dict it writes to summary.json) as lines for people."""
    unit = summary["token"]
    challenged = summary["challenged"]

    def accuracy(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [f"proofswarm demo: pool {summary['pool_id']}, {summary['steps']} trainer steps, "
             f"{duration(round(summary['wall_s']))}",
             f"files: {summary['submitted']} submitted, {summary['accepted']} accepted, "
             f"{sum(challenged.values())} challenged",
             *(f"  {reason}: {count}" for reason, count in sorted(challenged.items(), key=lambda rc: (-rc[1], rc[0]))),
             f"adversary's files: {summary['adversary_submissions']} submitted, {summary['adversary_challenged']} "
             f"challenged, {summary['adversary_pending']} still pending",
             f"honest files challenged: {summary['honest_challenged']}",
             f"trainer: {summary['consumed']} files consumed ({summary['consumed_unaccepted']} not accepted, "
             f"{summary['consumed_overturned']} overturned)",
             f"held-out accuracy: {accuracy(summary['accuracy_start'])} at the start, "
             f"{accuracy(summary['accuracy_end'])} at the end"]
    slashed: dict[str, list[int]] = defaultdict(list)
    for s in summary["slashed"]:
        slashed[s["worker"]].append(s["amount"])
    lines.append(f"slashed: {tokens(summary['slashed_total'], unit)} in {len(summary['slashed'])} slashes")
    lines += [f"  {who}: {tokens(sum(amounts), unit)} in {len(amounts)} slashes" for who, amounts in slashed.items()]
    lines.append("validators:")
    for v in summary["validators"]:
        lines += [f"  {v['name']} ({v['conduct']})",
                  f"    verdicts {v['verdicts']} ({v['verdicts_overturned']} overturned); disputes won "
                  f"{v['disputes_won']}, lost {v['disputes_lost']}, open {v['disputes_open']}",
                  f"    stake change {tokens(v['stake_change'], unit)}, earned {tokens(v['earned'], unit)}"]
    lines.append("claimed:" if summary["claimed"] else "claimed: none")
    lines += [f"  {c['worker']}: {tokens(c['amount'], unit)}" for c in summary["claimed"]]
    lines.append("checks:")
    lines += [f"  {name}: {'passed' if ok else 'FAILED'}" for name, ok in summary["checks"].items()]
    return lines
