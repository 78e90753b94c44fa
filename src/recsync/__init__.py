"""recsync: distributed training of deep recommendation models with switchable sync strategies."""

__version__ = "0.1.0"
