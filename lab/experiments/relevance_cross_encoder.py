"""Relevance probe: a cross-encoder fine-tuned offline on SQuAD.

TREC DL's relevant (grade >= 2) passages *answer* the query; many judged negatives are on
topic without answering. A bi-encoder's cosine (MPNet, the shipped judge) compares two
pooled vectors and cannot see whether the passage holds the answer; a cross-encoder
reads query and passage together. No MS MARCO-trained cross-encoder is available offline
(../shared/models/MODELS.md), so this trains one from MiniLM's weights on the only
question -> answering-passage data here: SQuAD v1.1 dev. Positive: a question and its
paragraph; negative: another paragraph of the same article (on topic, not answering,
the hard case TREC DL judges). Five articles are held out to check the training itself.

No TREC DL pair is used for training; ``relevance_probes.py report --scores`` then puts
the probe through the sweep's analysis (selection half chooses, test half reports).

    .venv/bin/python lab/experiments/relevance_cross_encoder.py train --pairs 16000  # ~20 min
    .venv/bin/python lab/experiments/relevance_cross_encoder.py score \\
        --out lab/results/probes/ce-squad-minilm.json
    .venv/bin/python lab/experiments/relevance_probes.py report \\
        --scores lab/results/probes/ce-squad-minilm.json --cosines embedder_large

Hand-written training loop (not sentence-transformers' CrossEncoder trainer): one BCE
objective, bfloat16 autocast on the CPU, and a progress bar are all it needs, and it
does not depend on that trainer's API, which changed between major versions.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm
from tribunal.core import load_settings, model_path
from tribunal_lab import data_root, read_jsonl
from tribunal_lab.evaluation._sweep_stats import auroc
from tribunal_lab.evaluation.judge import load_items

DATA = data_root()
MODEL_DIR = Path(".build/probes/ce-squad-minilm")
HELD_OUT_ARTICLES = 5


def _squad_pairs(seed: int) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(question, paragraph, label) pairs: training articles, held-out articles."""
    rows = list(read_jsonl(DATA / "squad-v1.1-dev" / "dev_flat.jsonl"))
    paragraphs: dict[str, dict[int, str]] = defaultdict(dict)
    for row in rows:
        paragraphs[row["title"]][row["para_idx"]] = row["context"]
    titles = sorted(paragraphs)
    rng = random.Random(seed)
    rng.shuffle(titles)
    held_out = set(titles[:HELD_OUT_ARTICLES])
    train: list[tuple[str, str, int]] = []
    check: list[tuple[str, str, int]] = []
    for row in rows:
        others = [i for i in paragraphs[row["title"]] if i != row["para_idx"]]
        negative = paragraphs[row["title"]][rng.choice(others)]
        target = check if row["title"] in held_out else train
        target += [(row["question"], row["context"], 1), (row["question"], negative, 0)]
    rng.shuffle(train)
    return train, check


class _Scorer:
    def __init__(self, path: Path, max_length: int) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
        self.max_length = max_length

    def encode(self, pairs: list[tuple[str, str]]) -> Any:
        return self.tokenizer(
            [q for q, _ in pairs],
            [p for _, p in pairs],
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )

    @torch.inference_mode()
    def logits(self, pairs: list[tuple[str, str]], batch: int = 32) -> np.ndarray:
        self.model.eval()
        out: list[np.ndarray] = []
        for start in tqdm(range(0, len(pairs), batch), desc="scoring", unit="batch"):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = self.model(**self.encode(pairs[start : start + batch])).logits
            out.append(logits.float().squeeze(-1).numpy())
        return np.concatenate(out)


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = model_path(load_settings("tiny"), "embedder")
    scorer = _Scorer(base, args.max_length)
    pairs, check = _squad_pairs(args.seed)
    pairs = pairs[: args.pairs]
    steps = (len(pairs) + args.batch - 1) // args.batch
    optimiser = torch.optim.AdamW(scorer.model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup)))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    scorer.model.train()
    started = time.perf_counter()
    bar = tqdm(range(steps), desc="training", unit="step")
    for step in bar:
        chunk = pairs[step * args.batch : (step + 1) * args.batch]
        batch = scorer.encode([(q, p) for q, p, _ in chunk])
        labels = torch.tensor([float(y) for _, _, y in chunk])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = scorer.model(**batch).logits.squeeze(-1)
        loss = loss_fn(logits.float(), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(scorer.model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    seconds = time.perf_counter() - started
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    scorer.model.save_pretrained(MODEL_DIR)
    scorer.tokenizer.save_pretrained(MODEL_DIR)
    held = scorer.logits([(q, p) for q, p, _ in check])
    y = np.array([label for _, _, label in check])
    info = {
        "base": str(base),
        "pairs": len(pairs),
        "batch": args.batch,
        "lr": args.lr,
        "max_length": args.max_length,
        "seed": args.seed,
        "train_seconds": round(seconds, 1),
        "held_out_pairs": len(check),
        "held_out_auroc": round(float(auroc(y, held)), 4),
    }
    (MODEL_DIR / "probe.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info, indent=2))


def score(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    scorer = _Scorer(MODEL_DIR, args.max_length)
    items = load_items("trec-dl", DATA, trec_pairs=300, seed=13)
    logits = scorer.logits([(i.fields["query"], i.fields["passage"]) for i in items])
    y = np.array([i.label for i in items])
    print(f"AUROC on all 300 TREC DL pairs: {auroc(y, logits):.3f}")
    probe = json.loads((MODEL_DIR / "probe.json").read_text())
    rows = {i.id: float(1 / (1 + np.exp(-v))) for i, v in zip(items, logits, strict=True)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"probe": probe, "p_relevant": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=192)
    commands = parser.add_subparsers(required=True)
    fit = commands.add_parser("train", help=f"fine-tune MiniLM on SQuAD into {MODEL_DIR}")
    fit.add_argument("--pairs", type=int, default=16_000, help="training pairs (half positive)")
    fit.add_argument("--batch", type=int, default=16)
    fit.add_argument("--lr", type=float, default=5e-5)
    fit.add_argument("--seed", type=int, default=13)
    fit.set_defaults(run=train)
    rate = commands.add_parser("score", help="P(relevant) of the 300 TREC DL pairs")
    rate.add_argument("--out", type=Path, required=True)
    rate.set_defaults(run=score)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
