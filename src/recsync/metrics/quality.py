"""Model quality on held-out data: logloss, normalized entropy, AUC, calibration."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

EPS = 1e-7


def logloss(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """Mean binary cross-entropy, probabilities clipped to [1e-7, 1 - 1e-7]."""
    p = probs.double().clamp(EPS, 1 - EPS)
    y = labels.double()
    return float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())


def entropy(ctr: float) -> float:
    """Binary entropy (nats) of a constant prediction equal to the mean CTR."""
    if ctr <= 0.0 or ctr >= 1.0:
        return 0.0
    return -(ctr * math.log(ctr) + (1 - ctr) * math.log(1 - ctr))


def normalized_entropy(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """Logloss divided by the entropy of the mean CTR (He et al. 2014); < 1 beats the prior."""
    h = entropy(float(labels.double().mean()))
    if h == 0.0:
        raise ValueError("normalized entropy is undefined when all labels are equal")
    return logloss(labels, probs) / h


def auc(labels: torch.Tensor, scores: torch.Tensor) -> float:
    """Area under the ROC curve (scikit-learn)."""
    from sklearn.metrics import roc_auc_score  # a second to import: only where AUC is scored

    y = labels.detach().cpu().numpy()
    if y.min() == y.max():
        raise ValueError("AUC is undefined when all labels are equal")
    return float(roc_auc_score(y, scores.detach().double().cpu().numpy()))


def calibration(labels: torch.Tensor, probs: torch.Tensor) -> float:
    """Mean prediction / mean label (1.0 is calibrated)."""
    mean_label = float(labels.double().mean())
    if mean_label == 0.0:
        raise ValueError("calibration is undefined when no label is positive")
    return float(probs.double().mean()) / mean_label


@dataclass(frozen=True)
class Quality:
    """The held-out measures of one evaluation."""

    examples: int
    logloss: float
    ne: float
    auc: float
    calibration: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def evaluate_predictions(labels: torch.Tensor, probs: torch.Tensor) -> Quality:
    if labels.numel() == 0:
        raise ValueError("cannot evaluate on an empty set")
    if not bool(torch.isfinite(probs).all()):
        raise ValueError("predictions contain NaN or infinity (training diverged?)")
    return Quality(
        examples=int(labels.numel()),
        logloss=logloss(labels, probs),
        ne=normalized_entropy(labels, probs),
        auc=auc(labels, probs),
        calibration=calibration(labels, probs),
    )
