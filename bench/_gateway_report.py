"""The gateway benchmark's report: its tables and the figures under them
(``bench/gateway.py``). A helper of the benchmarks, not one itself."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["concurrent_table", "percentile", "sequential_table"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def sequential_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The concurrency-1 comparison, printed as a table and returned (the JSON's part)."""
    table = {}
    for name in ("old", "new"):
        seconds = [r[name]["seconds"] for r in rows]
        accepted = [r for r in rows if r[name]["decision"] == "ACCEPT"]
        table[name] = {
            "right": sum(r[name]["entry"] == r["expected"] for r in accepted),
            "wrong": sum(r[name]["entry"] != r["expected"] for r in accepted),
            "paraphrases": sum(r["expected"] is not None for r in rows),
            "out_of_scope_refused": sum(
                r["expected"] is None and r[name]["decision"] != "ACCEPT" for r in rows
            ),
            "p50_s": percentile(seconds, 0.5),
            "p95_s": percentile(seconds, 0.95),
        }
    same = sum(
        (r["old"]["decision"], r["old"]["entry"]) == (r["new"]["decision"], r["new"]["entry"])
        for r in rows
    )
    print(f"\nconcurrency 1, the demo's {len(rows)} questions:")
    print("| path | right entry | wrong | out of scope refused | p50 s | p95 s |")
    print("|---|---|---|---|---|---|")
    labels = {"old": "old: entailment per query", "new": "new: the gateway now"}
    for name, t in table.items():
        print(
            f"| {labels[name]} | {t['right']} of {t['paraphrases']} | {t['wrong']} | "
            f"{t['out_of_scope_refused']} of {len(rows) - t['paraphrases']} | "
            f"{t['p50_s']:.3f} | {t['p95_s']:.3f} |"
        )
    share = table["new"]["p50_s"] / table["old"]["p50_s"]
    print(
        f"same decision and entry on {same} of {len(rows)}; new p50 = {share:.1%} of old "
        f"({1 / share:.0f}x faster)"
    )
    return {"paths": table, "same_decisions": same, "p50_share": share}


def concurrent_table(result: dict[str, Any]) -> None:
    """The concurrency-16 rounds, their ratios, the passes and the service's own work."""
    limit = result["new"]["limit"]
    print(
        f"\nconcurrency {result['concurrency']}, {result['queries']} other paraphrases, "
        f"each asked once per round, {len(result['rounds'])} rounds:"
    )
    print(
        "| round | limit: models alone, mean (before / after the round) | new, queries/s "
        "| share | p50 s | p99 s | one pass at a time, queries/s | share | new / it "
        "| passes not spread, queries/s | share | new / it |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for number, row in enumerate(result["rounds"], start=1):
        limit_row, new = row["limit"], row["new"]
        old, unspread = row["one_pass_at_a_time"], row["not_spread"]
        print(
            f"| {number} | {limit_row['queries_per_s']:.1f} "
            f"({limit_row['before']['queries_per_s']:.1f} / "
            f"{limit_row['after']['queries_per_s']:.1f}) | {new['queries_per_s']:.1f} | "
            f"{new['share_of_limit']:.0%} | {new['p50_s']:.3f} | {new['p99_s']:.3f} | "
            f"{old['queries_per_s']:.1f} | {old['share_of_limit']:.0%} | "
            f"{new['queries_per_s'] / old['queries_per_s']:.2f}x | "
            f"{unspread['queries_per_s']:.1f} | {unspread['share_of_limit']:.0%} | "
            f"{new['queries_per_s'] / unspread['queries_per_s']:.2f}x |"
        )
    print(
        "the models alone in passes of the gateway's sizes, share of the limit, round by "
        "round: "
        + "; ".join(
            f"{row['at_gateway_sizes']['share_of_limit']:.0%} ("
            + " / ".join(str(size) for size in row["at_gateway_sizes"]["sizes"].values())
            + " texts)"
            for row in result["rounds"]
        )
    )
    print(
        f"median share of the limit: {result['share_of_limit']:.0%}; passes side by side "
        f"answered {result['side_by_side_over_one_at_a_time']:.2f}x the queries/s of one "
        f"pass at a time, and spread passes {result['spread_over_not_spread']:.2f}x those of "
        "passes not spread (median rounds)"
    )
    for name in ("new", "not_spread"):
        cpu = sorted(row[name]["cpu_share"] for row in result["rounds"])
        print(
            f"the process's share of the cores, {name}: "
            + " / ".join(f"{share:.0%}" for share in cpu)
        )
        print(
            f"texts per pass, {name}, round by round: "
            + "; ".join(
                " / ".join(
                    f"{p['texts'] / max(1, p['passes']):.1f}" for p in row[name]["passes"].values()
                )
                for row in result["rounds"]
            )
            + " (retrieval's model / the matcher's)"
        )
    unbatched = result["new_unbatched"]
    ceiling = result["ceiling"]["queries_per_s"]
    after = result["limit_after"]["queries_per_s"]
    print(
        f"new, unbatched: {unbatched['queries_per_s']:.1f} queries/s "
        f"({unbatched['queries_per_s'] / after:.0%} of the limit taken right after it, "
        f"{after:.1f}); the embedders alone in batches of {result['ceiling_batch']}: "
        f"{ceiling:.1f} ({ceiling / after:.0%} of it)"
    )
    print(
        f"this process (the gateway, its in-process stages and the clients) used "
        f"{result['new']['cpu_share']:.0%} of the machine's {os.cpu_count()} cores "
        f"during the median round (limit {limit['queries_per_s']:.1f} queries/s)"
    )
    own = result["own_work"]
    print(
        f"the service's own work (every query asked again, no forward pass, the median of 3): "
        f"{own['cpu_ms_per_query']:.2f} CPU ms per query, against "
        f"{own['models_core_ms_per_query']:.1f} core-ms of the models per query at the "
        f"median round's limit: on this host the gateway can reach at most "
        f"{own['share_allowed']:.0%} of the limit (passes as cheap as alone, no core idle)"
        + (f"; {own['forward_passes']} passes ran meanwhile" if own["forward_passes"] else "")
    )
    print("\nthe models' passes inside the gateway (median round) vs the same queries alone:")
    print(
        "| model | passes | texts per pass | seconds in passes (summed over lanes) "
        "| alone, one pass at a time, batches of 16 |"
    )
    print("|---|---|---|---|---|")
    for key, row in result["new"]["passes"].items():
        alone = limit["models"][key]
        print(
            f"| {key} | {row['passes']} | {row['texts'] / max(1, row['passes']):.1f} | "
            f"{row['seconds']:.2f} | {alone:.2f} |"
        )
