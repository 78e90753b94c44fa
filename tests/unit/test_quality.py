"""Held-out quality measures: logloss, normalized entropy, AUC, calibration."""

from __future__ import annotations

import math

import pytest
import torch

from recsync.metrics.quality import (
    Quality,
    auc,
    calibration,
    entropy,
    evaluate_predictions,
    logloss,
    normalized_entropy,
)

LABELS = torch.tensor([1.0, 0.0, 1.0, 1.0])
PROBS = torch.tensor([0.9, 0.2, 0.6, 0.5])

# -(log 0.9 + log(1 - 0.2) + log 0.6 + log 0.5) / 4
EXPECTED_LOGLOSS = -(math.log(0.9) + math.log(0.8) + math.log(0.6) + math.log(0.5)) / 4
# mean CTR 3/4: H = -(0.75 log 0.75 + 0.25 log 0.25)
EXPECTED_ENTROPY = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))


def test_logloss_hand_value():
    assert logloss(LABELS, PROBS) == pytest.approx(EXPECTED_LOGLOSS, rel=1e-6)
    assert abs(EXPECTED_LOGLOSS - 0.3831192) < 1e-6


def test_entropy_and_ne_hand_value():
    assert entropy(0.75) == pytest.approx(EXPECTED_ENTROPY, rel=1e-12)
    assert entropy(0.0) == 0.0 and entropy(1.0) == 0.0
    ne = normalized_entropy(LABELS, PROBS)
    assert ne == pytest.approx(EXPECTED_LOGLOSS / EXPECTED_ENTROPY, rel=1e-6)
    # predicting the mean CTR everywhere gives NE = 1
    prior = torch.full((4,), 0.75)
    assert normalized_entropy(LABELS, prior) == pytest.approx(1.0, rel=1e-6)


def test_logloss_clips_probabilities():
    labels = torch.tensor([1.0, 0.0])
    probs = torch.tensor([0.0, 1.0])  # maximally wrong, clipped to 1e-7 and 1 - 1e-7
    assert logloss(labels, probs) == pytest.approx(-math.log(1e-7), rel=1e-6)
    assert math.isfinite(logloss(labels, probs))


def test_auc_known_values():
    assert auc(LABELS, PROBS) == pytest.approx(1.0)  # the negative (0.2) is ranked last
    # negatives 0.1, 0.4; positives 0.35, 0.8: 3 of the 4 (pos, neg) pairs are ordered -> 0.75
    labels = torch.tensor([0.0, 0.0, 1.0, 1.0])
    scores = torch.tensor([0.1, 0.4, 0.35, 0.8])
    assert auc(labels, scores) == pytest.approx(0.75)
    # ties count one half: pairs (0.5, 0.5) -> 0.5, (0.5, 0.1), (0.9, 0.5), (0.9, 0.1) -> 1
    labels = torch.tensor([0.0, 1.0, 0.0, 1.0])
    scores = torch.tensor([0.5, 0.5, 0.1, 0.9])
    assert auc(labels, scores) == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert auc(labels, -scores) == pytest.approx(1 - (0.5 + 1 + 1 + 1) / 4)


def test_calibration_hand_value():
    # mean prediction 2.2 / 4 = 0.55 ; mean label 0.75
    assert calibration(LABELS, PROBS) == pytest.approx(0.55 / 0.75, rel=1e-6)
    assert calibration(LABELS, torch.full((4,), 0.75)) == pytest.approx(1.0, rel=1e-6)


def test_evaluate_predictions_collects_everything():
    q = evaluate_predictions(LABELS, PROBS)
    assert isinstance(q, Quality)
    assert q.examples == 4
    assert q.logloss == pytest.approx(EXPECTED_LOGLOSS, rel=1e-6)
    assert q.ne == pytest.approx(EXPECTED_LOGLOSS / EXPECTED_ENTROPY, rel=1e-6)
    assert q.auc == pytest.approx(1.0)
    assert q.calibration == pytest.approx(0.55 / 0.75, rel=1e-6)
    assert set(q.as_dict()) == {"examples", "logloss", "ne", "auc", "calibration"}


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_all_equal_labels_raise(value):
    labels = torch.full((4,), value)
    with pytest.raises(ValueError, match="all labels are equal"):
        normalized_entropy(labels, PROBS)
    with pytest.raises(ValueError, match="all labels are equal"):
        auc(labels, PROBS)
    with pytest.raises(ValueError):
        evaluate_predictions(labels, PROBS)


def test_calibration_without_positives_raises():
    with pytest.raises(ValueError, match="no label is positive"):
        calibration(torch.zeros(3), torch.tensor([0.1, 0.2, 0.3]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_predictions_raise(bad):
    probs = PROBS.clone()
    probs[2] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        evaluate_predictions(LABELS, probs)


def test_empty_set_raises():
    with pytest.raises(ValueError, match="empty"):
        evaluate_predictions(torch.empty(0), torch.empty(0))
