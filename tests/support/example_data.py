"""Small files shaped like the public datasets users bring (examples/*.toml reads each):
Criteo TSV, Avazu CSV, Frappe libFM lines, MovieLens ratings as clicks, a Taobao-style
behaviour log. Each is deterministic from a seed, and its labels are drawn from a hidden
logistic teacher over its ids (and counts), so a model that learns reaches a test AUC
clearly above 0.5. The values are written as the real files write them (hex ids, a
header or none, -1/+1 labels, `|` and `^` lists); the sizes are small (a few thousand
rows, vocabularies of tens to hundreds of ids) so a job learns them in seconds."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recsync.metrics.quality import auc


class Teacher:
    """Hidden first-order weights of ids, drawn as each id is first met; the logit of a
    row is the sum of its ids' weights plus `bias`."""

    def __init__(self, rng: np.random.Generator, scale: float, bias: float) -> None:
        self.rng, self.scale, self.bias = rng, scale, bias
        self.weights: dict[tuple[str, object], float] = {}

    def weight(self, feature: str, value: object) -> float:
        found = self.weights.get((feature, value))
        if found is None:
            found = self.weights[(feature, value)] = float(self.rng.normal(0.0, self.scale))
        return found

    def labels(self, rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
        """Labels drawn with the logits' probabilities (kept for `best_auc`)."""
        self.probs = 1.0 / (1.0 + np.exp(-(logits + self.bias)))
        self.drawn = (rng.random(len(logits)) < self.probs).astype(int)
        return self.drawn

    def best_auc(self) -> float:
        """The AUC of the teacher's own probabilities on the labels it drew: the best a
        model can reach on the file (on average over its rows)."""
        return auc(torch.from_numpy(self.drawn), torch.from_numpy(self.probs))


def popular(rng: np.random.Generator, rows: int, vocab: int, exponent: float = 1.1) -> np.ndarray:
    """Indices in [0, vocab), Zipf-popular (index 0 the most common)."""
    weights = 1.0 / np.arange(1, vocab + 1) ** exponent
    return rng.choice(vocab, size=rows, p=weights / weights.sum())


def hex_ids(rng: np.random.Generator, vocab: int) -> np.ndarray:
    """`vocab` distinct 8-digit hex ids, as Criteo and Avazu write them."""
    values = rng.choice(2**32, size=vocab, replace=False)
    return np.array([f"{v:08x}" for v in values])


def _column_logits(teacher: Teacher, name: str, values: np.ndarray) -> np.ndarray:
    return np.array([teacher.weight(name, v) for v in values.tolist()])


# Criteo: label, I1-I13 (counts, some empty), C1-C26 (8-digit hex, some empty), TSV, no header
CRITEO_VOCABS = [3, 30, 60, 10, 80, 5, 15, 40, 3, 100, 25, 60] + [8, 50, 20, 4] * 3 + [30, 12]


def criteo(path: Path, rows: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    teacher = Teacher(rng, scale=0.8, bias=-1.2)
    counts = np.floor(np.exp(rng.normal(1.5, 1.2, (rows, 13)))).astype(int)
    logits = 0.5 * (np.log1p(counts[:, 0]) - 1.5) - 0.4 * (np.log1p(counts[:, 4]) - 1.5)
    cats = []
    for c, vocab in enumerate(CRITEO_VOCABS):
        ids = hex_ids(rng, vocab)[popular(rng, rows, vocab)]
        if c < 8:  # the teacher reads eight of the 26
            logits = logits + _column_logits(teacher, f"C{c}", ids)
        cats.append(ids)
    labels = teacher.labels(rng, logits)
    empty_count = rng.random((rows, 13)) < 0.1  # Criteo leaves counts empty...
    empty_cat = rng.random((rows, 26)) < 0.05  # ...and ids
    lines = []
    for r in range(rows):
        ints = ["" if empty_count[r, i] else str(counts[r, i]) for i in range(13)]
        ids = ["" if empty_cat[r, c] else str(cats[c][r]) for c in range(26)]
        lines.append("\t".join([str(labels[r]), *ints, *ids]))
    path.write_text("\n".join(lines) + "\n")
    return teacher.best_auc()


# Avazu: a header; id (a 20-digit number), click, hour (YYMMDDHH), integer codes and hex ids
AVAZU_HEX = {
    "site_id": 60, "site_domain": 40, "site_category": 10, "app_id": 50, "app_domain": 20,
    "app_category": 8, "device_id": 200, "device_ip": 300, "device_model": 120,
}  # fmt: skip
AVAZU_CODES = {
    "C1": [1005, 1002, 1010, 1007], "banner_pos": [0, 1, 7, 2], "device_type": [1, 0, 4, 5],
    "device_conn_type": [0, 2, 3, 5], "C14": list(range(15700, 15780)),
    "C15": [320, 300, 216, 728], "C16": [50, 250, 36, 480, 90], "C17": list(range(1700, 1760)),
    "C18": [0, 3, 2, 1], "C19": [35, 39, 167, 161, 47, 1063], "C20": [-1, 100084, 100148, 100111],
    "C21": [79, 23, 221, 61, 157, 32],
}  # fmt: skip
AVAZU_HEADER = [
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category",
    "app_id", "app_domain", "app_category", "device_id", "device_ip", "device_model",
    "device_type", "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
]  # fmt: skip
AVAZU_TAUGHT = ("site_id", "app_id", "device_model", "C14", "C17", "banner_pos", "hour")


def avazu(path: Path, rows: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    teacher = Teacher(rng, scale=0.9, bias=-1.6)
    columns: dict[str, np.ndarray] = {
        # 20 digits, past 2^64 as Avazu's ids often are
        "id": np.array(
            [f"{v}{r % 10}" for r, v in enumerate(rng.integers(10**18, 9 * 10**18, rows))]
        ),
        "hour": 14102100 + 100 * rng.integers(0, 3, rows) + rng.integers(0, 24, rows),
    }
    for name, vocab in AVAZU_HEX.items():
        columns[name] = hex_ids(rng, vocab)[popular(rng, rows, vocab)]
    for name, codes in AVAZU_CODES.items():
        columns[name] = np.array(codes)[popular(rng, rows, len(codes))]
    logits = sum(_column_logits(teacher, name, columns[name]) for name in AVAZU_TAUGHT)
    columns["click"] = teacher.labels(rng, np.asarray(logits))
    lines = [",".join(AVAZU_HEADER)]
    lines += [",".join(str(columns[n][r]) for n in AVAZU_HEADER) for r in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return teacher.best_auc()


# Frappe as the libFM files have it: a -1/1 label, then one `index:1` per field, global
# indices (each field's range after the one before), 10 fields
FRAPPE_FIELDS = {
    "user": 150, "item": 250, "daytime": 7, "weekday": 7, "isweekend": 2, "homework": 3,
    "cost": 2, "weather": 9, "country": 20, "city": 50,
}  # fmt: skip


def frappe(path: Path, rows: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    teacher = Teacher(rng, scale=0.9, bias=-0.8)
    factors = {f: rng.normal(0, 0.8, (n, 4)) for f, n in FRAPPE_FIELDS.items()}
    offset, tokens, logits = 0, [], np.zeros(rows)
    picked = {}
    for field, size in FRAPPE_FIELDS.items():
        values = popular(rng, rows, size, 0.8)
        picked[field] = values
        logits += _column_logits(teacher, field, values)
        tokens.append(offset + values)
        offset += size
    # a user-item interaction, as the FM part models it
    logits += np.sum(factors["user"][picked["user"]] * factors["item"][picked["item"]], axis=1)
    labels = np.where(teacher.labels(rng, logits) == 1, "1", "-1")
    lines = [" ".join([labels[r], *(f"{t[r]}:1" for t in tokens)]) for r in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return teacher.best_auc()


# MovieLens ratings as clicks: user_id, item_id, rating, timestamp, genres (`|` list), label
GENRES = [
    "Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Documentary", "Drama",
    "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller",
    "War", "Western",
]  # fmt: skip


def movielens(path: Path, rows: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    teacher = Teacher(rng, scale=0.7, bias=0.0)
    users, items = 1 + popular(rng, rows, 200, 0.7), 1 + popular(rng, rows, 300, 0.9)
    item_genres = {
        i: "|".join(sorted(rng.choice(GENRES, size=rng.integers(1, 4), replace=False)))
        for i in range(1, 301)
    }
    taste = {u: rng.choice(GENRES, size=3, replace=False) for u in range(1, 201)}
    genres = np.array([item_genres[i] for i in items.tolist()])
    logits = _column_logits(teacher, "user", users) + _column_logits(teacher, "item", items)
    logits += np.array(
        [
            sum(teacher.weight("genre", g) + 0.8 * (g in taste[u]) for g in gs.split("|"))
            for u, gs in zip(users.tolist(), genres.tolist(), strict=True)
        ]
    )
    # a rating of 0.5 to 5 whose chance of >= 4 follows the logit; the label is rating >= 4
    good = teacher.labels(rng, logits - 0.6)
    high, low = rng.choice([4.0, 4.5, 5.0], rows), rng.choice(np.arange(1, 8) / 2, rows)
    rating = np.where(good == 1, high, low)
    timestamps = 964_982_703 + np.sort(rng.integers(0, 86_400 * 365, rows))
    lines = ["user_id,item_id,rating,timestamp,genres,label"]
    lines += [
        f"{users[r]},{items[r]},{rating[r]},{timestamps[r]},{genres[r]},{int(rating[r] >= 4)}"
        for r in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return teacher.best_auc()


# Taobao-style behaviour log: string ids, the items clicked before as one `^` list
def taobao(path: Path, rows: int = 4000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    teacher = Teacher(rng, scale=0.8, bias=-1.0)
    num_items, num_categories = 400, 30
    item_category = rng.integers(0, num_categories, num_items)
    users = popular(rng, rows, 300, 0.8)
    items = popular(rng, rows, num_items, 0.9)
    logits = _column_logits(teacher, "user", users) + _column_logits(teacher, "item", items)
    logits += _column_logits(teacher, "category", item_category[items])
    histories = []
    for r in range(rows):
        length = int(rng.integers(0, 9))  # an empty history now and then
        clicked = popular(rng, length, num_items, 0.9)
        histories.append("^".join(f"i{v:06d}" for v in clicked))
        # the items clicked before say what the user likes
        logits[r] += 0.5 * sum(teacher.weight("clicked", v) for v in clicked.tolist())
    labels = teacher.labels(rng, logits)
    lines = ["user,item,category,hist_item_ids,label"]
    lines += [
        f"u{users[r]:05d},i{items[r]:06d},c{item_category[items[r]]:03d},{histories[r]},{labels[r]}"
        for r in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return teacher.best_auc()


# the example job of each shape, its data file's name and the generator that writes it
SHAPES: dict[str, tuple[str, Callable[..., float]]] = {
    "criteo": ("criteo.tsv", criteo),
    "avazu": ("avazu.csv", avazu),
    "frappe": ("frappe.libfm", frappe),
    "movielens": ("movielens.csv", movielens),
    "taobao": ("taobao.csv", taobao),
}


ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 4  # passes over a small file (the jobs themselves make one over a real one)


def command(shape: str) -> list[str]:
    """The command that trains the example job of `shape` on its generated file, as run
    from the repository's root with the file there."""
    file = SHAPES[shape][0]
    args = ["simulate", "-c", f"examples/{shape}.toml", "--set", f"data.path={file}"]
    return ["recsync", *args, "--epochs", str(EPOCHS)]


def run_example(shape: str, folder: Path, rows: int = 4000, seed: int = 0) -> dict[str, Any]:
    """Writes the file of `shape` into `folder`, trains its example job on it (the CLI,
    in-process, the run in folder/runs) and returns what it reached: a results.json entry.
    `exit_code` and `output` say how the command ended."""
    from typer.testing import CliRunner

    from recsync.app.cli.main import app

    file, write = SHAPES[shape]
    best = write(folder / file, rows=rows, seed=seed)
    words = command(shape)[1:]
    words[words.index(f"examples/{shape}.toml")] = str(ROOT / "examples" / f"{shape}.toml")
    words[words.index(f"data.path={file}")] = f"data.path={folder / file}"
    words += ["--set", f"run.runs_dir={folder / 'runs'}", "--name", shape, "--no-progress"]
    result = CliRunner().invoke(app, words, env={"COLUMNS": "200"})
    entry: dict[str, Any] = {"shape": shape, "exit_code": result.exit_code, "output": result.output}
    if result.exit_code != 0:
        return entry
    summary = json.loads((folder / "runs" / shape / "summary.json").read_text())
    return entry | {
        "job": f"examples/{shape}.toml",
        "file": file,
        "rows": rows,
        "seed": seed,
        "command": shlex.join(command(shape)),
        "examples_trained": summary["examples_trained"],
        "skipped": summary["skipped"]["total"],
        "train_loss": round(summary["train_loss"], 4),
        "test_auc": round(summary["test_auc"], 4),
        "test_logloss": round(summary["test_logloss"], 4),
        "test_ne": round(summary["test_ne"], 4),
        "teacher_auc": round(best, 4),
    }


TABLE_START = "<!-- results: written by examples/run_examples.py from examples/results.json -->"
TABLE_END = "<!-- end of results -->"


def results_table(results: list[dict[str, Any]]) -> str:
    """The docs page's table of what each example reached (between its markers)."""
    lines = [
        TABLE_START,
        "",
        "| example | file | rows | test AUC | test logloss | test NE | teacher AUC | command |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        lines.append(
            f"| [{r['shape']}](#{r['shape']}) | `{r['file']}` | {r['rows']:,} "
            f"| {r['test_auc']:.4f} | {r['test_logloss']:.4f} | {r['test_ne']:.4f} "
            f"| {r['teacher_auc']:.4f} | `{r['command']}` |"
        )
    return "\n".join([*lines, "", TABLE_END])
